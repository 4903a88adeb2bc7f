"""Format 1's run files: one file per log entry, journal record and retirement record.

runs/<run>/<kind>/<id> (docs/FORMAT.md, "Layout"), and the per-run lock files under locks/.
Repository is a RunFiles: features (core/) reach these files only through the methods here and
Repository's, so the format-2 engine can replace them with segments without touching core/.
"""

from __future__ import annotations

import os
from collections.abc import Collection, Iterator
from contextlib import AbstractContextManager
from pathlib import Path

from ..errors import InvalidName
from ..format import keys
from ..format.keys import LOG
from ..format.refs import Location
from ..fsutil import fsync_dir, fsync_file, make_dirs, write_atomic
from ..names import ID, check_name
from .locks import EXCLUSIVE, flock

ID_LENGTH = 26


class RunFiles:
    """The files of every run of the store at `root`; `sync_writes` as Repository's durability says."""

    def __init__(self, root: Path, *, sync_writes: bool) -> None:
        self.root = root
        self.sync_writes = sync_writes
        self.runs_dir = root / keys.RUNS
        self.tmp_dir = root / keys.TMP

    # listing

    def local_runs(self) -> Iterator[str]:
        """Names of the runs with at least one log entry in this store."""
        for log_dir in self.runs_dir.glob("**/log"):
            if not log_dir.is_dir():
                continue
            with os.scandir(log_dir) as entries:
                found = any(ID.fullmatch(e.name) for e in entries)
            if found:
                yield log_dir.parent.relative_to(self.runs_dir).as_posix()

    def local_entries(self) -> Iterator[Location]:
        """(run, id) of every log entry in the store, run by run."""
        for run in sorted(self.local_runs()):
            for checkpoint_id in self.local_ids(run):
                yield run, checkpoint_id

    def local_ids(self, run: str) -> list[str]:
        """The ids of `run`'s log entries in this store, oldest first."""
        try:
            # only entries are ever linked into a log dir; names are validated when read
            return sorted(name for name in os.listdir(self.log_dir(run)) if len(name) == ID_LENGTH)
        except FileNotFoundError:
            return []

    def record_ids(self, run: str, kind: str) -> list[str]:
        """The ids of `run`'s JOURNAL or RETIRED records, oldest first."""
        directory = self.record_dir(run, kind)
        try:
            with os.scandir(directory) as entries:
                return sorted(e.name for e in entries if ID.fullmatch(e.name) and e.is_file(follow_symlinks=False))
        except FileNotFoundError:
            return []

    def poll_record_ids(self, run: str, kind: str, known: Collection[str]) -> set[str]:
        """The ids of `run`'s JOURNAL or RETIRED records now, unordered, for a caller that polls:
        names in `known` (ids it already read as records) are taken without checking them again."""
        directory = os.path.join(self.root, *keys.record_dir_key(run, kind))  # str paths: pathlib costs more than the listing
        try:
            names = os.listdir(directory)
        except FileNotFoundError:
            return set()
        return {name for name in names if name in known or (ID.fullmatch(name) and os.path.isfile(os.path.join(directory, name)))}

    def local_records(self, kind: str) -> Iterator[tuple[str, str]]:
        """(run, id) of every JOURNAL or RETIRED record in the store.

        runs/x/journal/ may also hold the directories of runs named x/journal or x/journal/<...>:
        only regular files named by a ULID are records.
        """
        for directory in self.runs_dir.glob(f"**/{kind}"):
            if directory.parent == self.runs_dir or not directory.is_dir():  # runs/journal is the run "journal"
                continue
            run = directory.parent.relative_to(self.runs_dir).as_posix()
            try:
                check_name(run, "run")
            except InvalidName:
                continue
            for name in self.record_ids(run, kind):
                yield run, name

    # paths: for the engine and sync only (core/ uses the methods below)

    def record_dir(self, run: str, kind: str) -> Path:
        """runs/<run>/<kind>/: LOG entries, JOURNAL records or RETIRED records."""
        return self.root.joinpath(*keys.record_dir_key(run, kind))

    def log_dir(self, run: str) -> Path:
        return self.record_dir(run, LOG)

    def entry_path(self, run: str, checkpoint_id: str) -> Path:
        return self.log_dir(run) / checkpoint_id

    def where_stored(self, run: str, kind: str, record_id: str) -> str:
        """Where an entry (kind LOG) or record lies, for messages: its file."""
        return os.path.join(self.root, *keys.record_key(run, kind, record_id))

    # entries

    def has_entry(self, run: str, checkpoint_id: str) -> bool:
        """Whether this store holds the log entry (never asks a remote)."""
        return self.entry_path(run, checkpoint_id).exists()

    def local_entry(self, run: str, checkpoint_id: str) -> bytes | None:
        """The entry's bytes as stored here, unverified; None if there is none (never the cache or a remote)."""
        try:
            return self.entry_path(run, checkpoint_id).read_bytes()
        except FileNotFoundError:
            return None

    def append_entry(self, run: str, checkpoint_id: str, data: bytes) -> bool:
        """Add a log entry whole, never replacing one: False if the run already has `checkpoint_id`.

        Durable when it returns (durability="power"): the bytes, the entry's name and every directory
        above it up to the store, even ones another process made and never synced. With "process",
        it survives a killed process only. A crash midway leaves no entry, at worst a file in tmp/.
        """
        return write_atomic(self.tmp_dir, self.entry_path(run, checkpoint_id), data, sync=self.sync_writes)

    def repair_entry(self, run: str, checkpoint_id: str, data: bytes) -> bool:
        """Put verified bytes of the same checkpoint in place of a local entry found damaged (repair only:
        an intact entry is never replaced). Durable as append_entry."""
        return write_atomic(self.tmp_dir, self.entry_path(run, checkpoint_id), data, sync=self.sync_writes, exclusive=False)

    # journal and retirement records

    def append_record(self, run: str, kind: str, record_id: str, data: bytes) -> bool:
        """Add a JOURNAL or RETIRED record whole, never replacing one: False if it exists. Durable as append_entry."""
        return write_atomic(self.tmp_dir, self.record_dir(run, kind) / record_id, data, sync=self.sync_writes)

    def read_record(self, run: str, kind: str, record_id: str) -> bytes | None:
        """A record's bytes, unverified; None if it is gone (removed since it was listed)."""
        try:
            with open(self.where_stored(run, kind, record_id), "rb") as handle:
                return handle.read()
        except FileNotFoundError:
            return None

    def record_size(self, run: str, kind: str, record_id: str) -> int | None:
        """The bytes a record takes here; None if it is gone."""
        try:
            return os.stat(self.where_stored(run, kind, record_id)).st_size
        except FileNotFoundError:
            return None

    def make_records_durable(self, run: str, kind: str, record_ids: list[str]) -> None:
        """Make records durable whoever wrote them: their bytes, names and the directories above.

        Hazard: another process may have added them and been killed before it synced (or run with
        durability="process"); what is returned from them must not be undone by power loss.
        Nothing to do with durability="process".
        """
        if not self.sync_writes:
            return
        directory = self.record_dir(run, kind)
        for record_id in record_ids:
            fsync_file(directory / record_id)
        make_dirs(directory, sync=True)
        fsync_dir(directory)

    def remove_files(self, run: str, kind: str, ids: list[str]) -> None:
        """Remove entries (kind LOG) or records; the removals are durable when it returns (durability="power")."""
        if not ids:
            return
        directory = self.record_dir(run, kind)
        for name in ids:
            (directory / name).unlink(missing_ok=True)
        if self.sync_writes and directory.exists():
            fsync_dir(directory)

    # per-run locks

    def lock_path(self, run: str) -> Path:
        # flat and hashed: nested names would collide ("x" vs "x.lock/y") and may exceed NAME_MAX
        return self.root.joinpath(*keys.run_lock_key(run))

    def journal_lock_path(self, run: str) -> Path:
        return self.lock_path(run).with_suffix(".journal.lock")

    def appending(self, run: str) -> AbstractContextManager[None]:
        """Held exclusively around one append to the run's log: who holds it reads the head and appends after it."""
        return flock(self.lock_path(run), EXCLUSIVE)

    def journal_lock(self, run: str) -> AbstractContextManager[None]:
        """Held exclusively while a journal reads the run's records, decides and records a call's start."""
        return flock(self.journal_lock_path(run), EXCLUSIVE)
