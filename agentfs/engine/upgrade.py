"""`agentfs upgrade`: convert a format-1 store to format 2 in place, crash-safely (docs/FORMAT.md,
"Upgrading a format-1 store").

A self-contained, read-only reader of format 1's files (objects/ab/<62 hex>, runs/<run>/log|journal|
retired/<id>, forks/<sha256(source)>/<sha256(target)>) feeds one SegmentWriter: every record is
verified as it is read and appended with its bytes unchanged (format/kinds.py); a damaged one is
reported and skipped. Then, in this order, each step durable before the next:

1. segments/ written in full (each batch fdatasynced, each new segment and segments/ fsynced);
2. remotes/ dropped: it caches what was pushed to format-1 remotes, which a format-2 store never uses;
3. THE COMMIT POINT: the config rewritten with "format": 2 (temp file, fsync, rename, directory fsync);
4. the format-1 files removed (objects/, runs/, forks/, locks/runs/, locks/pruned).

A crash before 3 leaves a format-1 store whose format-1 files were only read (a stray segments/,
which the next upgrade discards and writes again); a crash after 3 a format-2 store with leftover
format-1 names, which the next upgrade removes and the engine never reads.
"""

from __future__ import annotations

import collections
import dataclasses
import fcntl
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..errors import AgentFSError, Conflict, FormatError, InvalidName, NotFound
from ..format import codec, kinds
from ..format.bounded_json import load_json
from ..format.config import ENCRYPTED_HASH, MAX_CONFIG, encode_config
from ..format.entries import decode_entry_at
from ..format.journal import decode_record
from ..format.keys import digest
from ..format.retirement import decode_retirement
from ..format.segment import Record
from ..fsutil import fsync_dir, trust_above, write_atomic
from ..names import ID, check_name
from .segment_writer import SegmentWriter

FROM, TO = 1, 2
CONFIG, TMP, LOCKS, SEGMENTS, REMOTES = "config", "tmp", "locks", "segments", "remotes"
# format 1's names: read here, removed after the commit point; none of them is a format-2 name
OBJECTS, RUNS, FORKS = "objects", "runs", "forks"
FORMAT1_NAMES = ((OBJECTS,), (RUNS,), (FORKS,), (LOCKS, "runs"), (LOCKS, "pruned"))
GC_LOCK = (LOCKS, "gc.lock")  # format 1's writers hold it shared around every commit and prune
FORKS_INDEXED = "indexed"
BATCH_BYTES = 8 << 20  # records appended (and fdatasynced) together: bounds the memory the upgrade holds


@dataclasses.dataclass
class UpgradeReport:
    """What `upgrade` found and did (with dry_run, what it would do)."""

    root: Path
    found_format: int
    dry_run: bool = False
    converted: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)  # kind name -> records
    converted_bytes: int = 0
    damaged: list[str] = dataclasses.field(default_factory=list)  # one line per record skipped
    discarded_segments: bool = False  # a segments/ left by an interrupted upgrade was thrown away
    dropped_remotes: list[str] = dataclasses.field(default_factory=list)  # names under remotes/
    removed: list[str] = dataclasses.field(default_factory=list)  # format-1 names removed

    def to_json(self) -> dict[str, Any]:
        fields = dataclasses.asdict(self)
        fields["root"], fields["converted"] = str(self.root), dict(self.converted)
        return fields


def read_format(root: Path) -> tuple[int, dict[str, Any]]:
    """(format, config) of the store at `root`: 1 or 2; NotFound without a config, FormatError for another."""
    path = root / CONFIG
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise NotFound(f"no agentfs store at {root}: {path} does not exist") from None
    config = load_json(data, str(path), max_bytes=MAX_CONFIG)
    if not isinstance(config, dict) or not isinstance(config.get("store_id"), str):
        raise FormatError(f"{path} is not an agentfs store config")
    encrypted_2 = config.get("hash") == ENCRYPTED_HASH and config.get("format") == TO  # encryption came with format 2
    if config.get("hash") != "sha256" and not encrypted_2:
        raise FormatError(f"{path} is not an agentfs store config")
    found = config.get("format")
    if found not in (FROM, TO) or type(found) is not int:
        raise FormatError(f"{path} has format {found!r}; agentfs upgrade converts format {FROM} to {TO}")
    return found, config


def upgrade(root: Path, *, dry_run: bool = False) -> UpgradeReport:
    """Convert the format-1 store at `root` to format 2 (see the module's docstring); with `dry_run`,
    read and verify every record and report, writing nothing. A format-2 store is left as it is,
    but for leftover format-1 names of an upgrade interrupted after its commit point, which go."""
    found, _config = read_format(root)
    report = UpgradeReport(root, found, dry_run)
    if found == TO:  # no lock: format 2 never reads the leftovers, and its own processes may be running
        if not dry_run:
            report.removed = _remove(root, list(FORMAT1_NAMES))
        return report
    if dry_run:
        for record in _records(root, report.damaged):
            report.converted[kinds.NAMES[record.kind]] += 1
            report.converted_bytes += len(record.body)
        report.dropped_remotes = _names(root / REMOTES)
        return report
    trust_above(root)
    with _excluding_writers(root):
        found, config = read_format(root)  # another upgrade may have finished while this one waited
        report.found_format = found
        if found == FROM:
            _convert(root, report)
            report.dropped_remotes = _names(root / REMOTES)
            _remove(root, [(REMOTES,)])
            write_atomic(root / TMP, root / CONFIG, encode_config({**config, "format": TO}), sync=True, exclusive=False)
        report.removed = _remove(root, list(FORMAT1_NAMES))
    return report


@contextmanager
def _excluding_writers(root: Path) -> Iterator[None]:
    """Hold format 1's gc lock exclusively: no format-1 commit, prune or gc runs meanwhile."""
    path = root.joinpath(*GC_LOCK)
    os.makedirs(path.parent, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise Conflict(f"{root} is in use: another process holds {path}; stop every agentfs process using it, then upgrade") from None
        yield
    finally:
        os.close(fd)


def _convert(root: Path, report: UpgradeReport) -> None:
    """Append every verified format-1 record to a new segments/ (discarding one an interrupted upgrade left)."""
    if (root / SEGMENTS).exists():
        shutil.rmtree(root / SEGMENTS)
        fsync_dir(root)  # gone for good before new segments are written: never two generations at once
        report.discarded_segments = True
    os.makedirs(root / TMP, exist_ok=True)
    with SegmentWriter(root / SEGMENTS, root / LOCKS, durability="power") as writer:
        batch: list[Record] = []
        size = 0
        for record in _records(root, report.damaged):
            batch.append(record)
            size += len(record.key) + len(record.body)
            report.converted[kinds.NAMES[record.kind]] += 1
            report.converted_bytes += len(record.body)
            if size >= BATCH_BYTES:
                writer.append(batch)
                batch, size = [], 0
        if batch:
            writer.append(batch)
        writer.seal()


def _remove(root: Path, names: list[tuple[str, ...]]) -> list[str]:
    """Remove each name under `root` (a tree or a file) if present; durable when it returns."""
    removed, parents = [], set()
    for parts in names:
        path = root.joinpath(*parts)
        is_tree = path.is_dir() and not path.is_symlink()
        if is_tree:
            shutil.rmtree(path)
        elif path.exists() or path.is_symlink():
            path.unlink()
        else:
            continue
        removed.append("/".join(parts) + ("/" if is_tree else ""))
        parents.add(path.parent)
    for parent in sorted(parents):
        fsync_dir(parent)
    return removed


def _names(directory: Path) -> list[str]:
    try:
        return sorted(os.listdir(directory))
    except FileNotFoundError:
        return []


# The format-1 reader. Records are yielded verified and in this order: objects, then each run's
# entries, journal and retirement records, then fork markers.


def _records(root: Path, damaged: list[str]) -> Iterator[Record]:
    yield from _objects(root / OBJECTS, damaged)
    runs: set[str] = set()
    for run, directory in _run_dirs(root / RUNS):
        runs.add(run)
        for subdir, kind in kinds.KIND_OF.items():  # format 1 kept each kind of record in a directory of its name
            for record_id in _record_ids(directory / subdir):
                record = _run_record(directory / subdir / record_id, kind, run, record_id, damaged)
                if record is not None:
                    yield record
    yield from _forks(root / FORKS, runs, damaged)


def _objects(objects: Path, damaged: list[str]) -> Iterator[Record]:
    for fan_out in _names(objects):
        if len(fan_out) != 2 or not _is_hex(fan_out):
            continue
        for name in _names(objects / fan_out):
            if len(name) != 62 or not _is_hex(name):
                continue  # not an object's name: format 1 never read it either
            path = objects / fan_out / name
            oid = bytes.fromhex(fan_out + name)
            blob = path.read_bytes()
            try:
                codec.decode(blob, oid, str(path))
            except AgentFSError as exc:
                damaged.append(str(exc))
                continue
            yield Record(kinds.OBJECT, oid, blob)


def _is_hex(name: str) -> bool:
    return all(c in "0123456789abcdef" for c in name)


def _run_dirs(runs: Path) -> Iterator[tuple[str, Path]]:
    """(run name, its directory) of every directory under runs/ whose relative path is a valid run name."""
    for directory, subdirs, _files in os.walk(runs):
        subdirs.sort()
        name = Path(directory).relative_to(runs).as_posix()
        try:
            yield check_name(name, "run"), Path(directory)
        except InvalidName:  # runs/ itself, or a kind's directory (runs/x/log)
            continue


def _record_ids(directory: Path) -> list[str]:
    """The ULID-named regular files of a run's log/, journal/ or retired/ (other names are nested runs)."""
    try:
        with os.scandir(directory) as entries:
            return sorted(e.name for e in entries if ID.fullmatch(e.name) and e.is_file(follow_symlinks=False))
    except (FileNotFoundError, NotADirectoryError):
        return []


def _run_record(path: Path, kind: int, run: str, record_id: str, damaged: list[str]) -> Record | None:
    """The record in `path`, verified as format 1's reader would; None (reported) if it is damaged."""
    data = path.read_bytes()
    try:
        if kind == kinds.ENTRY:
            entry = decode_entry_at(data, run, record_id, str(path))
            for oid in entry.pack:
                entry.packed(oid, str(path))
        elif kind == kinds.JOURNAL:
            decode_record(data, run, record_id, str(path))
        else:
            decode_retirement(data, run, record_id, str(path))
    except AgentFSError as exc:
        damaged.append(str(exc))
        return None
    return Record(kind, kinds.pair_key(run, record_id), data)


def _forks(forks: Path, runs: set[str], damaged: list[str]) -> Iterator[Record]:
    """forks/<sha256(source)>/<sha256(target)> holds the target's name; the source is the run whose digest names the directory."""
    by_digest = {digest(run): run for run in runs}
    for source_digest in _names(forks):
        if source_digest == FORKS_INDEXED:
            continue
        for target_digest in _names(forks / source_digest):
            path = forks / source_digest / target_digest
            try:
                target = path.read_text()
            except (UnicodeDecodeError, IsADirectoryError):
                target = ""
            source = by_digest.get(source_digest)
            if digest(target) != target_digest or source is None:
                why = "does not hold the name its path digests" if source is not None else "names a source run with no directory"
                damaged.append(f"fork marker {path} {why}")
                continue
            yield Record(kinds.FORK, kinds.pair_key(source, target), b"")
