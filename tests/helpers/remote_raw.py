"""Raw access to what a remote holds, bypassing the sync code under test (format 2: packs, pack indexes, head keys).

Tests that look for, damage or delete what a push put on a remote do it through these functions, so
each keeps asserting its promise ("the entry reached the remote", "a corrupt remote record is never
installed", "a remote that lost data is repaired") whatever the remote's layout. Each takes an fsspec
filesystem and the remote's root path (`RemoteSpec.connect()` gives both). A record is named by its
kind (format/kinds.py) and key: an object's id, or `kinds.pair_key(run, id)`.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterator
from typing import Any, NamedTuple

from agentfs.format import keys, kinds
from agentfs.format.pack import decode_pack_index, encode_pack
from agentfs.format.segment import Record, decode_record


class Frame(NamedTuple):
    pack: str  # the pack's key
    offset: int
    length: int


def _names(fs: Any, directory: str) -> list[str]:
    fs.invalidate_cache(directory)
    try:
        return sorted(posixpath.basename(path.rstrip("/")) for path in fs.ls(directory, detail=False))
    except FileNotFoundError:
        return []


def pack_ids(fs: Any, root: str) -> list[str]:
    """Every pack with an index."""
    suffix = keys.PACK_INDEX_SUFFIX
    return [name[: -len(suffix)] for name in _names(fs, posixpath.join(root, keys.PACKS)) if name.endswith(suffix)]


def _indexes(fs: Any, root: str) -> Iterator[tuple[str, list[Any]]]:
    """Each pack with an index, and the entries its index lists."""
    for pack_id in pack_ids(fs, root):
        data = bytes(fs.cat_file(posixpath.join(root, *keys.pack_index_key(pack_id))))
        _size, entries = decode_pack_index(data, pack_id, f"pack index {pack_id}")
        yield pack_id, entries


def frames(fs: Any, root: str) -> dict[tuple[int, bytes], Frame]:
    """Where each record lies, read from every pack index."""
    found: dict[tuple[int, bytes], Frame] = {}
    for pack_id, entries in _indexes(fs, root):
        for entry in entries:
            found.setdefault((entry.kind, entry.key), Frame(posixpath.join(root, *keys.pack_key(pack_id)), entry.offset, entry.length))
    return found


def entry_ids(fs: Any, root: str, run: str) -> set[str]:
    """The ids of `run`'s log entries that some pack index names."""
    return record_ids(fs, root, kinds.ENTRY, run)


def record_ids(fs: Any, root: str, kind: int, run: str) -> set[str]:
    """The ids of `run`'s records of `kind` (kinds.JOURNAL, kinds.RETIRED, ...) that some pack index names."""
    return {kinds.split_pair_key(key, "")[1] for k, key in frames(fs, root) if k == kind and kinds.split_pair_key(key, "")[0] == run}


def head_ids(fs: Any, root: str, run: str) -> list[str]:
    """The ids `run`'s head keys name (a push writes one per head it moved the run to, after the packs), ascending."""
    return sorted(filter(None, map(keys.head_id_of, _names(fs, posixpath.join(root, *keys.head_dir_key(run))))))


def has_head(fs: Any, root: str, run: str, checkpoint_id: str) -> bool:
    """Whether a head key names `run`@`checkpoint_id` (so its entry and closure are up)."""
    return checkpoint_id in head_ids(fs, root, run)


def flip_in_record(fs: Any, root: str, kind: int, key: bytes) -> Frame:
    """Flip a byte in the middle of a record's frame, in its pack (the pack rewritten whole, same length)."""
    frame = frames(fs, root)[(kind, key)]
    data = bytearray(fs.cat_file(frame.pack))
    data[frame.offset + frame.length // 2] ^= 0xFF
    fs.rm_file(frame.pack)
    fs.pipe_file(frame.pack, bytes(data))
    return frame


def record_body(fs: Any, root: str, kind: int, key: bytes) -> bytes:
    """A record's body, as the pack holding it has it (its frame checked)."""
    frame = frames(fs, root)[(kind, key)]
    data = bytes(fs.cat_file(frame.pack, start=frame.offset, end=frame.offset + frame.length))
    return decode_record(data, frame.pack).body


def put_record(fs: Any, root: str, kind: int, key: bytes, body: bytes) -> None:
    """Make the remote hold `body` as the record, in a well-framed pack (what a careless or hostile pusher
    could write): the pack holding the record is rewritten (a new pack, the old one deleted), else a new
    pack holds it alone."""
    held = frames(fs, root).get((kind, key))
    records = [Record(kind, key, body)]
    if held is not None:
        data = bytes(fs.cat_file(held.pack))
        pack_id = pack_id_of(held)
        index = bytes(fs.cat_file(posixpath.join(root, *keys.pack_index_key(pack_id))))
        for entry in decode_pack_index(index, pack_id, held.pack)[1]:
            if (entry.kind, entry.key) != (kind, key):
                records.append(decode_record(data[entry.offset : entry.offset + entry.length], held.pack))
    pack = encode_pack(records, bytes(16))
    fs.makedirs(posixpath.join(root, keys.PACKS), exist_ok=True)
    fs.pipe_file(posixpath.join(root, *keys.pack_key(pack.pack_id)), pack.data)
    fs.pipe_file(posixpath.join(root, *keys.pack_index_key(pack.pack_id)), pack.footer)
    if held is not None:
        delete_pack(fs, root, pack_id_of(held))


def delete_pack(fs: Any, root: str, pack_id: str) -> None:
    """Delete a pack and its index."""
    for key in (keys.pack_index_key(pack_id), keys.pack_key(pack_id)):
        fs.rm_file(posixpath.join(root, *key))


def pack_id_of(frame: Frame) -> str:
    return posixpath.basename(frame.pack)[: -len(keys.PACK_SUFFIX)]


def delete_packs_holding(fs: Any, root: str, oids: set[bytes]) -> int:
    """Delete (index and pack) every pack whose index names an object of `oids` (a remote that lost them); how many."""
    doomed = [pack_id for pack_id, entries in _indexes(fs, root) if any(entry.key in oids for entry in entries)]
    for pack_id in doomed:
        delete_pack(fs, root, pack_id)
    return len(doomed)


def delete_packs(fs: Any, root: str) -> list[str]:
    """Delete every pack and its index (a remote that lost its data); the ids deleted."""
    deleted = pack_ids(fs, root)
    for pack_id in deleted:
        delete_pack(fs, root, pack_id)
    return deleted
