"""Raw access to what a local store holds, outside the store's API (implemented for format 2: segments).

It opens no Store, takes no lock and shares no cache with the store under test, but it is not
independent of the engine: it finds and reads records with the engine's own segment reader and index
(engine/segments.py, engine/index.py), so a test through it trusts those two, which
tests/engine/test_segments.py, tests/engine/test_index.py and tests/engine/test_index_footer.py test on their own.

Tests that damage, delete, count or read stored bytes do it through these functions only, so a new
on-disk format re-implements this one module and every test keeps asserting the same promise. Each
function takes an open store or the store's root directory. Objects are named by their id (sha256
bytes); records by (run, kind, id), kind being LOG_RECORDS (a checkpoint's log entry), JOURNAL_RECORDS or RETIRED_RECORDS.
The bytes read and written are a record's own bytes (the same in every container format).

Format 2: a record is a frame in a segment file (segments/). Reading builds a fresh index of the
segments (retired records hidden, as every reader sees them). Changing a record's bytes keeps its
frame valid (a test damages what the record holds, not the container): a change of the same length
is patched in place (frame checksum recomputed); any other change rewrites each affected segment
into a new sealed segment and deletes the old one, which a live store's index notices (rebuild) and
a live writer too (it rolls over to a new segment).
"""

from __future__ import annotations

import os
import struct
import time
from collections.abc import Callable, Iterable
from pathlib import Path

from agentfs import Store
from agentfs.engine.index import Index
from agentfs.engine.repository import Repository
from agentfs.engine.segments import FrameLocation, open_segment, segment_ids
from agentfs.format import keys, kinds
from agentfs.format import segment as fmt
from agentfs.format.keys import JOURNAL_RECORDS, LOG_RECORDS, RETIRED_RECORDS

__all__ = [
    "JOURNAL_RECORDS",
    "LOG_RECORDS",
    "RETIRED_RECORDS",
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

StoreLike = Store | Repository | Path | str
Key = tuple[int, bytes]
Change = Callable[[fmt.Record], fmt.Record | None]  # a record -> what replaces it (None: dropped)


def _root(store: StoreLike) -> Path:
    return store.root if isinstance(store, (Store, Repository)) else Path(store)


def _segments(store: StoreLike) -> Path:
    return _root(store) / keys.SEGMENTS


def _index(store: StoreLike) -> Index:
    return Index(_segments(store))


def _read(store: StoreLike, location: FrameLocation) -> fmt.Record:
    with open(_segments(store) / fmt.segment_name(location.segment_id), "rb") as handle:
        handle.seek(location.offset)
        return fmt.decode_record(handle.read(location.length), "raw")


def _record_key(run: str, kind: str, record_id: str) -> Key:
    return kinds.KIND_OF[kind], kinds.pair_key(run, record_id)


def _locations(store: StoreLike, key: Key) -> list[FrameLocation]:
    """Every stored copy of the record `key`, whether the index would hide it or not."""
    found = []
    for segment_id in segment_ids(_segments(store)):
        view = open_segment(_segments(store) / fmt.segment_name(segment_id))
        found += [FrameLocation(segment_id, e.offset, e.length) for e in view.entries if (e.kind, e.key) == key]
    return found


def flipped(data: bytes, position: int) -> bytes:
    """`data` with every bit of the byte at `position` inverted."""
    return data[:position] + bytes([data[position] ^ 0xFF]) + data[position + 1 :]


def _patch(store: StoreLike, location: FrameLocation, record: fmt.Record) -> None:
    """Write `record` (same frame length) over the frame at `location`, its checksum recomputed."""
    payload = struct.pack(">H", len(record.key)) + record.key + record.body
    frame = fmt.encode_frame(record.kind, payload)
    assert len(frame) == location.length
    fd = os.open(_segments(store) / fmt.segment_name(location.segment_id), os.O_WRONLY)
    try:
        os.pwrite(fd, frame, location.offset)
    finally:
        os.close(fd)


def _rewrite(store: StoreLike, segment_id: int, change: Change, mtime: float | None = None) -> None:
    """Replace the segment by a new sealed one holding its records as `change` makes them."""
    directory = _segments(store)
    old = directory / fmt.segment_name(segment_id)
    view = open_segment(old)
    records = [r for e in view.entries if (r := change(_read(store, FrameLocation(segment_id, e.offset, e.length)))) is not None]
    new_id = segment_ids(directory)[-1] + 1
    data = fmt.encode_header(new_id, view.header.slot, os.urandom(16))
    entries: list[fmt.IndexEntry] = []
    if records:
        batch, entries = fmt.encode_batch(new_id, len(data), records)
        data += batch
    data += fmt.encode_seal(new_id, len(data), entries)
    temp = _root(store) / keys.TMP / f"raw-{new_id}"
    temp.write_bytes(data)
    if mtime is not None:
        os.utime(temp, (mtime, mtime))
    os.rename(temp, directory / fmt.segment_name(new_id))
    old.unlink()


def _replace(store: StoreLike, key: Key, body: bytes | None) -> None:
    """Make every stored copy of `key` hold `body` (None: drop them)."""
    for location in _locations(store, key):
        record = _read(store, location)
        if body is not None and len(body) == len(record.body):
            _patch(store, location, fmt.Record(record.kind, record.key, body))
        else:
            _rewrite(store, location.segment_id, lambda r: r if (r.kind, r.key) != key else None if body is None else r._replace(body=body))


# objects


def object_ids(store: StoreLike) -> set[bytes]:
    """The ids of every object the store holds, referenced or not."""
    index = _index(store)
    try:
        return set(index.object_ids())
    finally:
        index.close()


def has_object(store: StoreLike, oid: bytes) -> bool:
    """Whether the store holds a stored copy of this object (sound or not)."""
    return oid in object_ids(store)


def object_bytes(store: StoreLike, oid: bytes) -> bytes:
    """The stored bytes of this object (its record's body: header and encoded bytes)."""
    index = _index(store)
    try:
        location = index.object_location(oid)
        return _read(store, location if location is not None else _locations(store, (kinds.OBJECT, oid))[0]).body
    finally:
        index.close()


def set_object_bytes(store: StoreLike, oid: bytes, data: bytes) -> None:
    """Make the stored copy of this object hold `data` instead (to damage it, or to restore it)."""
    if _locations(store, (kinds.OBJECT, oid)):
        _replace(store, (kinds.OBJECT, oid), data)
    else:
        _append(store, fmt.Record(kinds.OBJECT, oid, data))


def corrupt_object(store: StoreLike, oid: bytes) -> bytes:
    """Make the stored copy of this object fail its hash check (one byte of its body flipped); returns the sound bytes."""
    sound = object_bytes(store, oid)
    set_object_bytes(store, oid, flipped(sound, len(sound) // 2))
    return sound


def flip_in_place(store: StoreLike, oid: bytes) -> None:
    """Flip one byte inside the stored copy of this object where it lies (a bad disk sector): its frame no longer
    matches its checksum."""
    location = _locations(store, (kinds.OBJECT, oid))[0]
    fd = os.open(_segments(store) / fmt.segment_name(location.segment_id), os.O_RDWR)
    try:
        position = location.offset + location.length // 2
        os.pwrite(fd, bytes([os.pread(fd, 1, position)[0] ^ 0xFF]), position)
    finally:
        os.close(fd)


def age_objects(store: StoreLike, oids: Iterable[bytes], seconds: float) -> None:
    """Make these stored objects look written `seconds` ago, as gc's grace period sees them: they move
    into a sealed segment of their own whose mtime is that long ago."""
    wanted = {(kinds.OBJECT, oid) for oid in oids}
    moved: list[fmt.Record] = []

    def take(record: fmt.Record) -> fmt.Record | None:
        if (record.kind, record.key) in wanted:
            moved.append(record)
            return None
        return record

    for segment_id in sorted({location.segment_id for key in wanted for location in _locations(store, key)}):
        _rewrite(store, segment_id, take)
    _append(store, *moved, mtime=time.time() - seconds)


def delete_object(store: StoreLike, oid: bytes) -> None:
    """Lose the stored copy of this object, as a disk that lost it would."""
    _replace(store, (kinds.OBJECT, oid), None)


def _append(store: StoreLike, *records: fmt.Record, mtime: float | None = None) -> None:
    """Add `records` in a new sealed segment of their own."""
    directory = _segments(store)
    new_id = (segment_ids(directory) or [0])[-1] + 1
    data = fmt.encode_header(new_id, 0, os.urandom(16))
    batch, entries = fmt.encode_batch(new_id, len(data), records)
    data += batch + fmt.encode_seal(new_id, len(data) + len(batch), entries)
    temp = _root(store) / keys.TMP / f"raw-{new_id}"
    temp.write_bytes(data)
    if mtime is not None:
        os.utime(temp, (mtime, mtime))
    os.rename(temp, directory / fmt.segment_name(new_id))


# records: log entries, journal records, retirement records


def record_ids(store: StoreLike, run: str, kind: str = LOG_RECORDS) -> list[str]:
    """The ids of the run's stored records of this kind, sorted (for LOG_RECORDS: every checkpoint's entry, sound or not)."""
    index = _index(store)
    try:
        return index.ids(kinds.KIND_OF[kind], run)
    finally:
        index.close()


def has_record(store: StoreLike, run: str, kind: str, record_id: str) -> bool:
    """Whether the store holds this record (sound or not)."""
    return record_id in record_ids(store, run, kind)


def record_bytes(store: StoreLike, run: str, kind: str, record_id: str) -> bytes:
    """The stored bytes of this record."""
    return _read(store, _locations(store, _record_key(run, kind, record_id))[0]).body


def set_record_bytes(store: StoreLike, run: str, kind: str, record_id: str, data: bytes) -> None:
    """Make the store hold `data` as this record (to damage, restore, or copy one in from another store)."""
    key = _record_key(run, kind, record_id)
    if _locations(store, key):
        _replace(store, key, data)
    else:
        _append(store, fmt.Record(*key, data))


def corrupt_record(store: StoreLike, run: str, kind: str, record_id: str) -> bytes:
    """Make this stored record fail its checksum (its middle byte flipped); returns the sound bytes."""
    sound = record_bytes(store, run, kind, record_id)
    set_record_bytes(store, run, kind, record_id, flipped(sound, len(sound) // 2))
    return sound


# the store as a whole


def stored_records(store: StoreLike) -> dict[tuple[str, str, str], bytes]:
    """Every stored record's bytes by (run, kind, id): equal dicts mean no record was added, lost or changed."""
    index = _index(store)
    try:
        return {
            (run, kind, record_id): _read(store, location).body
            for kind in keys.RECORD_NAMES
            for run in index.runs(kinds.KIND_OF[kind])
            for record_id in index.ids(kinds.KIND_OF[kind], run)
            if (location := index.location(kinds.KIND_OF[kind], run, record_id)) is not None
        }
    finally:
        index.close()


def stored(store: StoreLike) -> dict[str, bytes]:
    """Every stored object and record by a stable name: equal dicts mean nothing was added, lost or changed."""
    index = _index(store)
    try:
        objects = {f"object {oid.hex()}": index.read(location).body for oid, location in index.object_locations().items()}
    finally:
        index.close()
    return objects | {f"record {' '.join(name)}": data for name, data in stored_records(store).items()}


def stored_object_size(store: StoreLike) -> int:
    """Bytes the store's objects hold (their records' bodies)."""
    index = _index(store)
    try:
        return sum(index.object_lengths())
    finally:
        index.close()


def stored_size(store: StoreLike) -> int:
    """Bytes the store's objects and records hold (what storage-cost tests compare)."""
    return stored_object_size(store) + sum(map(len, stored_records(store).values()))


def temp_files(store: StoreLike) -> list[str]:
    """Scratch files left in the store (there must be none once every call returned)."""
    directory = _root(store) / keys.TMP
    return sorted(p.name for p in directory.iterdir()) if directory.is_dir() else []
