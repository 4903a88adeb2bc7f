"""Raw access to what a local store holds, bypassing the store under test (implemented for format 1).

Tests that damage, delete, count or read stored bytes do it through these functions only, so a new
on-disk format re-implements this one module and every test keeps asserting the same promise. Each
function takes an open store or the store's root directory. Objects are named by their id (sha256
bytes); records by (run, kind, id), kind being LOG (a checkpoint's log entry), JOURNAL or RETIRED.
The bytes read and written are a record's own bytes (the same in every container format).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

from agentfs.engine.repository import Repository
from agentfs.format import keys
from agentfs.format.keys import JOURNAL, LOG, RETIRED

__all__ = [
    "JOURNAL",
    "LOG",
    "RETIRED",
    "age_objects",
    "corrupt_object",
    "corrupt_record",
    "delete_object",
    "flipped",
    "has_object",
    "has_record",
    "object_bytes",
    "object_ids",
    "record_bytes",
    "record_ids",
    "set_object_bytes",
    "set_record_bytes",
    "stored",
    "stored_object_size",
    "stored_records",
    "stored_size",
    "temp_files",
]

StoreLike = Repository | Path | str


def _root(store: StoreLike) -> Path:
    return store.root if isinstance(store, Repository) else Path(store)


def _object_path(store: StoreLike, oid: bytes) -> Path:
    return _root(store).joinpath(*keys.object_key(oid))


def _record_path(store: StoreLike, run: str, kind: str, record_id: str) -> Path:
    return _root(store).joinpath(*keys.record_key(run, kind, record_id))


def flipped(data: bytes, position: int) -> bytes:
    """`data` with every bit of the byte at `position` inverted."""
    return data[:position] + bytes([data[position] ^ 0xFF]) + data[position + 1 :]


# objects


def object_ids(store: StoreLike) -> set[bytes]:
    """The ids of every object the store holds, referenced or not."""
    top = _root(store) / keys.OBJECTS
    return {bytes.fromhex(p.parent.name + p.name) for p in top.glob("*/*") if p.is_file()} if top.is_dir() else set()


def has_object(store: StoreLike, oid: bytes) -> bool:
    """Whether the store holds a stored copy of this object (sound or not)."""
    return _object_path(store, oid).is_file()


def object_bytes(store: StoreLike, oid: bytes) -> bytes:
    """The stored bytes of this object (its record: header and encoded body)."""
    return _object_path(store, oid).read_bytes()


def set_object_bytes(store: StoreLike, oid: bytes, data: bytes) -> None:
    """Make the stored copy of this object hold `data` instead (to damage it, or to restore it)."""
    path = _object_path(store, oid)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.exists():
        path.chmod(0o644)  # object files are stored read-only: without this a non-root test cannot write
    path.write_bytes(data)


def corrupt_object(store: StoreLike, oid: bytes) -> bytes:
    """Make the stored copy of this object fail its hash check (one byte of its body flipped); returns the sound bytes."""
    sound = object_bytes(store, oid)
    set_object_bytes(store, oid, flipped(sound, len(sound) // 2))
    return sound


def age_objects(store: StoreLike, oids: Iterable[bytes], seconds: float) -> None:
    """Make these stored objects look written `seconds` ago, as gc's grace period sees them."""
    then = time.time() - seconds
    for oid in oids:
        os.utime(_object_path(store, oid), (then, then))


def delete_object(store: StoreLike, oid: bytes) -> None:
    """Lose the stored copy of this object, as a disk that lost it would."""
    _object_path(store, oid).unlink()


# records: log entries, journal records, retirement records


def record_ids(store: StoreLike, run: str, kind: str = LOG) -> list[str]:
    """The ids of the run's stored records of this kind, sorted (for LOG: every checkpoint's entry, sound or not)."""
    directory = _root(store).joinpath(*keys.record_dir_key(run, kind))
    return sorted(p.name for p in directory.iterdir() if p.is_file()) if directory.is_dir() else []


def has_record(store: StoreLike, run: str, kind: str, record_id: str) -> bool:
    """Whether the store holds this record (sound or not)."""
    return _record_path(store, run, kind, record_id).is_file()


def record_bytes(store: StoreLike, run: str, kind: str, record_id: str) -> bytes:
    """The stored bytes of this record."""
    return _record_path(store, run, kind, record_id).read_bytes()


def set_record_bytes(store: StoreLike, run: str, kind: str, record_id: str, data: bytes) -> None:
    """Make the store hold `data` as this record (to damage, restore, or copy one in from another store)."""
    path = _record_path(store, run, kind, record_id)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def corrupt_record(store: StoreLike, run: str, kind: str, record_id: str) -> bytes:
    """Make this stored record fail its checksum (its middle byte flipped); returns the sound bytes."""
    sound = record_bytes(store, run, kind, record_id)
    set_record_bytes(store, run, kind, record_id, flipped(sound, len(sound) // 2))
    return sound


# the store as a whole


def _record_files(store: StoreLike) -> Iterator[tuple[tuple[str, str, str], Path]]:
    top = _root(store) / keys.RUNS
    for path in sorted(top.rglob("*")):
        parts = path.relative_to(top).parts
        if len(parts) >= 3 and parts[-2] in keys.RECORD_KINDS and path.is_file():
            yield ("/".join(parts[:-2]), parts[-2], parts[-1]), path


def stored_records(store: StoreLike) -> dict[tuple[str, str, str], bytes]:
    """Every stored record's bytes by (run, kind, id): equal dicts mean no record was added, lost or changed."""
    return {name: path.read_bytes() for name, path in _record_files(store)}


def stored(store: StoreLike) -> dict[str, bytes]:
    """Every stored object and record by a stable name: equal dicts mean nothing was added, lost or changed."""
    objects = {f"object {oid.hex()}": object_bytes(store, oid) for oid in object_ids(store)}
    return objects | {f"record {' '.join(name)}": data for name, data in stored_records(store).items()}


def stored_object_size(store: StoreLike) -> int:
    """Bytes the store's objects take on disk."""
    return sum(_object_path(store, oid).stat().st_size for oid in object_ids(store))


def stored_size(store: StoreLike) -> int:
    """Bytes the store's objects and records take on disk (what storage-cost tests compare)."""
    return stored_object_size(store) + sum(path.stat().st_size for _, path in _record_files(store))


def temp_files(store: StoreLike) -> list[str]:
    """Scratch files left in the store (there must be none once every call returned)."""
    directory = _root(store) / keys.TMP
    return sorted(p.name for p in directory.iterdir()) if directory.is_dir() else []
