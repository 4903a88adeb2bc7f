"""The repository: one local directory of objects, run logs, records, locks and remote state.

The engine's one interface to what is stored; features (core/) and sync (sync/) both build on it,
and the public Store (api.py) is a Repository with the features added.

The engine API: all core/ may use (a forbidden import contract keeps it off fsutil and the locks),
and what the format-2 engine must provide with the same contracts. "Durable" means it survives
power loss once the call returns, with durability="power" (with "process", a killed process only).

- entries: `append_entry` (whole, durable, never replaces), `has_entry`, `read_entry` (verified,
  cached, fetched from a remote if missing), `local_entry` (raw bytes here only), `cache_entry`,
  `head`, `heads` (this process's hint), `ids`, `local_ids`, `local_runs`, `local_entries`.
  From a remote: `install_entry` (verified; with `replace=`, a repair of a damaged local copy).
- records (JOURNAL, RETIRED): `append_record` (whole, durable, never replaces), `record_ids`,
  `poll_record_ids`, `read_record`, `record_size`, `local_records`, `retirements`, and
  `make_records_durable` for records another process wrote and may have left unsynced.
- retention and forks: `retire` (a durable retirement record first, then the removals, durable),
  `note_fork` (durable before the fork's entry), `forks_of`, `index_forks`.
- locks: `appending(run)` around one append to a run's log, `journal_lock(run)`, `writing()`
  (shared, by every commit), `excluding_writers()` (exclusive: prune and gc).
- config: `read_config`, `rewrite_config` (durable, under the config lock).
- objects: `db` (written through ObjectWriter; `sizes()`), `drop_stale_references`, `pool`.
- `where_stored` names where an entry or record lies, for messages; `writer()`, `id`, `source`.
- for sync: `remote_state_dir(name)` and `remote_state_names()` (a remote's private state: caches,
  not truth), `repair_record` (a damaged local record replaced by a verified copy), `watched_dir()`
  (every commit makes a file-system event under it: a hint, never the truth).

Paths (`entry_path`, `record_dir`, `tmp_dir`, ...) are format 1's, for the engine and sync only.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Literal, Protocol, TypeVar

from ..aio import Offloader
from ..errors import AgentFSError, FormatError, IntegrityError, NotFound
from ..format import keys
from ..format.config import encode_config, new_config, read_config
from ..format.entries import Entry, decode_entry_at
from ..format.keys import JOURNAL, LOG, RETIRED
from ..format.refs import Location
from ..format.retirement import Retirement, decode_retirement, encode_retirement
from ..fsutil import make_dirs, trust_above, write_atomic
from .locks import EXCLUSIVE, SHARED, flock
from .objectdb import ObjectDB
from .run_files import ID_LENGTH, RunFiles

HOST = socket.gethostname()
log = logging.getLogger("agentfs")

Durability = Literal["power", "process"]
DURABILITY: tuple[str, ...] = ("power", "process")
ENTRY_CACHE = 256
R = TypeVar("R", bound="Repository")


class Source(Protocol):
    """Where a store fetches what it lacks: a remote, read as untrusted."""

    def fetch_entry(self, run: str, checkpoint_id: str) -> bytes | None: ...
    def fetch_object(self, oid: bytes) -> bytes | None: ...
    def list_ids(self, run: str, kind: str = ...) -> list[str]: ...
    def fetch_record(self, kind: str, run: str, record_id: str) -> bytes | None: ...
    def head_id(self, run: str) -> str | None: ...
    def list_runs(self) -> list[str]: ...
    def list_journal(self, run: str) -> list[str]: ...
    def fetch_journal(self, run: str, record_id: str) -> bytes | None: ...
    def attach(self, store: Repository) -> None: ...


class Repository(RunFiles):
    """A local agentfs store's storage. Safe to share between threads and between processes."""

    def __init__(self, root: Path, *, durability: Durability = "power", source: Source | None = None) -> None:
        if durability not in DURABILITY:
            raise ValueError(f"durability must be one of {DURABILITY}, got {durability!r}")
        super().__init__(root, sync_writes=durability == "power")
        self.durability = durability
        self.objects_dir = root / keys.OBJECTS
        self.remotes_dir = root / keys.REMOTES
        self.forks_dir = root / keys.FORKS
        self.forks_indexed = root.joinpath(*keys.FORKS_INDEXED)
        self.gc_lock_path = root.joinpath(*keys.GC_LOCK)
        self.config_lock_path = root.joinpath(*keys.CONFIG_LOCK)
        self.pruned_path = root.joinpath(*keys.PRUNED)  # replaced by every prune: see drop_stale_references
        self._pruned_seen: tuple[int, int] | None = None
        self.config = self._open_config()
        self.source = source
        self.db = ObjectDB(self.objects_dir, self.tmp_dir, sync=self.sync_writes)
        if source is not None:
            source.attach(self)
            self.db.fetch = source.fetch_object
        self._entries: OrderedDict[Location, Entry] = OrderedDict()
        self.heads: dict[str, str] = {}  # run -> the last id this process appended: a hint, not the truth
        self._retirements_fetched: set[str] = set()  # runs whose remote retirement records this process has fetched
        self._lock = threading.Lock()
        self._pool: ThreadPoolExecutor | None = None
        self.offload = Offloader()  # runs the blocking work of the async twins (aio.py)

    def _open_config(self) -> dict[str, Any]:
        """Read the config, creating the store first if needed.

        The config is published before any other directory: creation killed midway, or raced by
        another process, leaves either no config (and only the store's own names) or a complete one.
        """
        config_path = self.root / keys.CONFIG
        created = False
        layout = (self.objects_dir, self.runs_dir, self.root.joinpath(*keys.RUN_LOCKS), self.tmp_dir, self.remotes_dir, self.forks_dir)
        if self.sync_writes:
            trust_above(self.root)
        if not config_path.is_file():
            own = {path.name for path in layout} | {keys.CONFIG}  # config: another process just created the store
            if self.root.exists() and any(p.name not in own for p in self.root.iterdir()):
                raise FormatError(f"{self.root} exists, is not empty and has no agentfs config: not an agentfs store")
            make_dirs(self.tmp_dir, sync=self.sync_writes)
            created = write_atomic(self.tmp_dir, config_path, encode_config(new_config()), sync=self.sync_writes)  # loses a race quietly
        config = read_config(config_path)
        for path in layout:
            make_dirs(path, sync=self.sync_writes)
        if created:  # a new store records every fork from its start (an older one is indexed by its first prune)
            write_atomic(self.tmp_dir, self.forks_indexed, b"", sync=self.sync_writes, exclusive=False)
        return config

    @property
    def id(self) -> str:
        return str(self.config["store_id"])

    @property
    def pool(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="agentfs-io")
            return self._pool

    def close(self) -> None:
        self.offload.close()  # first: the calls it still runs may use the pool
        with self._lock:
            if self._pool is not None:
                self._pool.shutdown(wait=True)
                self._pool = None

    def __enter__(self: R) -> R:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<agentfs.Store {str(self.root)!r}>"

    # runs and their logs

    def runs(self) -> list[str]:
        """Names of every run with at least one checkpoint (here or on the remote)."""
        names = set(self.local_runs())
        if self.source is not None:  # a run retention removed whole on another machine is not listed
            names.update(run for run in set(self.source.list_runs()) - names if self.ids(run))
        return sorted(names)

    def writer(self) -> dict[str, Any]:
        """Who writes a record: this store, host and process."""
        return {"store": self.id, "host": HOST, "pid": os.getpid()}

    def head(self, run: str) -> str | None:
        """The greatest id of the run: its head."""
        try:
            local = max((name for name in os.listdir(self.log_dir(run)) if len(name) == ID_LENGTH), default=None)
        except FileNotFoundError:
            local = None
        if self.source is None:
            return local
        remote = self.source.head_id(run)
        retired = self.retired_ids(run)
        if remote in retired:  # retired on another machine: the newest id it kept instead
            remote = max(set(self.source.list_ids(run)) - retired, default=None)
        return max(filter(None, [local, remote]), default=None)

    def ids(self, run: str) -> list[str]:
        ids = set(self.local_ids(run))
        if self.source is not None:
            # the remote lists only names that are ULIDs; those pruned here stay on it until its gc
            ids.update(set(self.source.list_ids(run)) - self.retired_ids(run))
        return sorted(ids)

    def retirements(self, run: str) -> list[Retirement]:
        """The run's retirement records: what retention removed from it on purpose.

        With a remote, its records for `run` are fetched (verified) first, once per process: a run's
        ids and head are not trusted before the remote's retirements are known.
        """
        if self.source is not None and run not in self._retirements_fetched:
            self._fetch_retirements(run)
        directory = self.record_dir(run, RETIRED)
        return [decode_retirement((directory / n).read_bytes(), run, n, f"{run} retired/{n}") for n in self.record_ids(run, RETIRED)]

    def _fetch_retirements(self, run: str) -> None:
        assert self.source is not None
        directory = self.record_dir(run, RETIRED)
        for record_id in sorted(set(self.source.list_ids(run, RETIRED)) - set(self.record_ids(run, RETIRED))):
            data = self.source.fetch_record(RETIRED, run, record_id)
            if data is None:
                continue  # removed by a remote gc since it was listed
            decode_retirement(data, run, record_id, f"remote {run} retired/{record_id}")
            write_atomic(self.tmp_dir, directory / record_id, data, sync=self.sync_writes)
        self._retirements_fetched.add(run)

    def retired_ids(self, run: str) -> set[str]:
        """Checkpoint ids of `run` that retention removed on purpose."""
        return {cid for record in self.retirements(run) for cid in record.checkpoints}

    def read_entry(self, run: str, checkpoint_id: str) -> Entry:
        key = (run, checkpoint_id)
        with self._lock:
            cached = self._entries.get(key)
            if cached is not None:
                self._entries.move_to_end(key)
                return cached
        path = self.entry_path(run, checkpoint_id)
        where = f"{run}@{checkpoint_id}"
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            entry = self._fetch_entry(run, checkpoint_id)
        else:
            try:
                entry = decode_entry_at(data, run, checkpoint_id, f"{where} ({path})")
            except (FormatError, IntegrityError):
                if self.source is None:
                    raise
                # a damaged local copy and a remote: its copy, verified, replaces ours (automatic repair)
                entry = self._fetch_entry(run, checkpoint_id, replace=True)
                log.warning("checkpoint %s was damaged in %s: repaired from the remote", where, self.root)
        self.cache_entry(key, entry)
        return entry

    def forget(self, run: str, checkpoint_ids: list[str]) -> None:
        """Drop removed checkpoints from this process's caches."""
        with self._lock:
            for checkpoint_id in checkpoint_ids:
                self._entries.pop((run, checkpoint_id), None)
            if self.heads.get(run) in checkpoint_ids:
                del self.heads[run]

    def cache_entry(self, key: Location, entry: Entry) -> None:
        with self._lock:
            self._entries[key] = entry
            if len(self._entries) > ENTRY_CACHE:
                self._entries.popitem(last=False)

    def _fetch_entry(self, run: str, checkpoint_id: str, *, replace: bool = False) -> Entry:
        if self.source is not None and checkpoint_id in self.retired_ids(run):
            raise NotFound(f"checkpoint {checkpoint_id} of run {run!r} was retired by retention")
        data = self.source.fetch_entry(run, checkpoint_id) if self.source is not None else None
        if data is None:
            raise NotFound(f"checkpoint {checkpoint_id} not found in run {run!r}")
        entry = decode_entry_at(data, run, checkpoint_id, f"remote {run}@{checkpoint_id}")
        self.install_entry(run, checkpoint_id, data, entry, replace=replace)
        return entry

    def install_entry(self, run: str, checkpoint_id: str, data: bytes, entry: Entry, *, replace: bool = False) -> bool:
        """Add an entry verified as `entry` (from a remote). Entries are never replaced, but with `replace`:
        a local copy found damaged (it does not decode) is replaced by this verified one (repair)."""
        sources = {source for source, _id in entry.borrowed()}  # a fork, or an Artifact of another run reused
        if entry.manifest.forked_from is not None:
            sources.add(entry.manifest.forked_from[0])
        for source in sorted(sources - {run}):
            self.note_fork(source, run)
        with self._lock:
            self._entries.pop((run, checkpoint_id), None)
        if replace:  # repair: a damaged local copy gives way to this verified one
            return self.repair_entry(run, checkpoint_id, data)
        return self.append_entry(run, checkpoint_id, data)

    def retire(self, record: Retirement) -> None:
        """Remove what `record` names from its run: first the record itself, durably, then the
        checkpoints' log entries and the journal records, then this process's cache of them.

        Call with excluding_writers() held. When it returns the record and the removals are
        durable (durability="power"), and commits in any process have been told to forget which
        objects they knew referenced (see drop_stale_references).
        """
        self.append_record(record.run, RETIRED, record.id, encode_retirement(record, self.writer()))
        write_atomic(self.tmp_dir, self.pruned_path, record.id.encode(), sync=False, exclusive=False)
        self.remove_files(record.run, LOG, record.checkpoints)
        self.remove_files(record.run, JOURNAL, record.journal)
        self.forget(record.run, record.checkpoints)

    # forks: the only way a run's entries borrow from another run's

    def note_fork(self, source: str, target: str) -> None:
        """Record, durably and before the fork's entry exists, that `target` may borrow from `source`."""
        path = self.root.joinpath(*keys.fork_key(source, target))
        if not path.exists():
            write_atomic(self.tmp_dir, path, target.encode(), sync=self.sync_writes, exclusive=False)

    def forks_of(self, run: str) -> set[str]:
        """Runs forked from `run`, and from those, and so on: every run that may borrow from it."""
        found: set[str] = set()
        todo = [run]
        while todo:
            directory = self.forks_dir / keys.digest(todo.pop())
            try:
                names = {(directory / n).read_text() for n in os.listdir(directory)}
            except FileNotFoundError:
                continue
            todo.extend(names - found - {run})
            found |= names
        found.discard(run)
        return found

    def index_forks(self) -> None:
        """Make forks/ name every fork in the store, once: a store from before forks/ existed lacks them.

        Entries that cannot be read are skipped (verify reports them). Durable when it returns.
        """
        if self.forks_indexed.exists():
            return
        for run, checkpoint_id in self.local_entries():
            with contextlib.suppress(AgentFSError):
                source = self.read_entry(run, checkpoint_id).manifest.forked_from
                if source is not None:
                    self.note_fork(source[0], run)
        write_atomic(self.tmp_dir, self.forks_indexed, b"", sync=self.sync_writes, exclusive=False)

    def read_packed(self, oid: bytes, location: Location) -> bytes:
        return self.read_entry(*location).packed(oid, f"log entry {location[0]}@{location[1]}")

    # for sync

    def remote_state_dir(self, name: str) -> Path:
        """remotes/<name>/, made if missing: one remote's private sync state (caches, not truth)."""
        directory = self.remotes_dir / name
        make_dirs(directory, sync=False)
        return directory

    def remote_state_names(self) -> list[str]:
        """The names of the remotes with a state directory here."""
        return sorted(p.name for p in self.remotes_dir.iterdir() if p.is_dir()) if self.remotes_dir.is_dir() else []

    def repair_record(self, run: str, kind: str, record_id: str, data: bytes) -> None:
        """Put verified bytes of the same record in place of a local one found damaged (repair only). Durable as append_record."""
        write_atomic(self.tmp_dir, self.record_dir(run, kind) / record_id, data, sync=self.sync_writes, exclusive=False)

    def watched_dir(self) -> Path:
        """Where every commit makes a file-system event: watch it for hints of new checkpoints."""
        return self.runs_dir

    # config

    def read_config(self) -> dict[str, Any]:
        """The config as stored now (another process may have changed it since this store opened)."""
        return read_config(self.root / keys.CONFIG)

    def rewrite_config(self, change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
        """Apply `change` to the config as stored now and replace it, under the config lock (two
        writers would each drop the other's fields); durable when it returns. The new config."""
        with flock(self.config_lock_path, EXCLUSIVE):
            config = self.read_config()
            change(config)
            write_atomic(self.tmp_dir, self.root / keys.CONFIG, encode_config(config), sync=self.sync_writes, exclusive=False)
        self.config = config
        return config

    # locks

    def drop_stale_references(self) -> None:
        """Forget which objects committed entries reference if any process pruned since we last looked.

        The commit's ObjectWriter skips checking objects it knows referenced; after a prune a gc may
        have deleted them. Called with the gc lock held shared, and prune replaces the file while
        holding it exclusively, so no prune can slip between this look and the entry's append.
        """
        try:
            stat = os.stat(self.pruned_path)
            seen: tuple[int, int] | None = (stat.st_ino, stat.st_mtime_ns)
        except FileNotFoundError:
            seen = None
        if seen != self._pruned_seen:
            self.db.referenced.clear()
            self._pruned_seen = seen

    def writing(self) -> AbstractContextManager[None]:
        """Held shared by every commit from its first object write to its log entry; gc deletes under it exclusively."""
        return flock(self.gc_lock_path, SHARED)

    def excluding_writers(self) -> AbstractContextManager[None]:
        """Held exclusively by prune and gc: no commit is between choosing what to borrow and appending its entry."""
        return flock(self.gc_lock_path, EXCLUSIVE)
