"""Where a plaintext store's bytes go, split by what they hold (issue 21's storage goal, issue 20's disk rows).

A value that grows by appending is stored as a chunk tree whose last chunk, and the last node of each level, are
made again at every commit: the bytes the heads hold are the content; the chunks and nodes no head holds any more
are what those commits rewrote. Entries are the checkpoints' log entries (their manifests, and the objects packed
into them); "other" is the rest of the files: batch frames, sealed segments' footers and seal copies,
preallocated space, other records (lineage, journal), the config.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from agentfs.engine.segments import open_segment, segment_ids
from agentfs.errors import AgentFSError
from agentfs.format import codec, kinds
from agentfs.format.entries import Entry, decode_entry_at
from agentfs.format.refs import parse_node
from agentfs.format.segment import FRAME, KEY_LENGTH, segment_name
from agentfs.format.walk import NODE, Children, Reached, reach


class StoreBytes(NamedTuple):
    """Bytes of a store's files (record frames as they lie, header and key included)."""

    content_chunks: int  # chunks (and loose objects) the heads' values hold
    rewritten_chunks: int  # chunks no head holds: a growing value's last chunk, made again at each commit
    content_nodes: int  # tree nodes the heads hold
    rewritten_nodes: int  # tree nodes no head holds: each level's last node, made again at each commit
    entries: int  # log entries, with what they pack
    packed: int  # of `entries`: the objects packed into them (a value of 16 KiB or less, whole)
    other: int  # the rest of the files: batch frames, footers, seal copies, preallocated space, other records, config
    total: int

    def per(self, count: int, unit: str) -> str:
        """One line: each part's bytes per `unit` (`count` of them made the store)."""
        parts = (
            ("content chunks", self.content_chunks),
            ("rewritten chunks", self.rewritten_chunks),
            ("content nodes", self.content_nodes),
            ("rewritten nodes", self.rewritten_nodes),
            (f"entries (packed objects {self.packed / count:,.0f})", self.entries),
            ("other (batch frames, footers, free space)", self.other),
        )
        listed = ", ".join(f"{name} {size / count:,.0f}" for name, size in parts)
        return f"store bytes per {unit}: {self.total / count:,.0f} = {listed}"


class _Record(NamedTuple):
    kind: int
    key: bytes
    frame: bytes


def _records(segments: Path) -> Iterator[_Record]:
    for segment_id in segment_ids(segments):
        path = segments / segment_name(segment_id)
        view = open_segment(path)
        data = path.read_bytes()
        for row in view.entries:
            yield _Record(row.kind, row.key, data[row.offset : row.offset + row.length])


def _body(record: _Record) -> bytes:
    return record.frame[FRAME.size + KEY_LENGTH.size + len(record.key) :]


def _entry(record: _Record) -> Entry:
    run, checkpoint_id = record.key.decode().split("\0", 1)
    return decode_entry_at(_body(record), run, checkpoint_id, f"{run}@{checkpoint_id}")


def store_bytes(root: Path | str) -> StoreBytes:
    """The split of the plaintext store at `root` (one that is not being written)."""
    root = Path(root)
    records = list(_records(root / "segments"))
    objects = {record.key: record for record in records if record.kind == kinds.OBJECT}
    entries = [(record, _entry(record)) for record in records if record.kind == kinds.ENTRY]

    def read_nodes(nodes: list[Reached]) -> list[Children | AgentFSError]:
        return [parse_node(codec.decode(_body(objects[node.oid]), node.oid, "benchmark"), node.oid, "benchmark") for node in nodes]

    def walk(chosen: list[Entry]) -> dict[bytes, str]:
        seen: set[bytes] = set()
        return {reached.oid: reached.role for entry in chosen for reached in reach(entry.refs(), read_nodes, seen)}

    named_as_parent = {(entry.manifest.run, entry.manifest.parent) for _record, entry in entries}
    heads = [entry for _record, entry in entries if (entry.manifest.run, entry.manifest.id) not in named_as_parent]
    held, every = walk(heads), walk([entry for _record, entry in entries])
    sizes = {"content_chunks": 0, "rewritten_chunks": 0, "content_nodes": 0, "rewritten_nodes": 0}
    for oid, record in objects.items():
        node = every.get(oid) == NODE
        part = ("content_" if oid in held else "rewritten_") + ("nodes" if node else "chunks")
        sizes[part] += len(record.frame)
    entry_bytes = sum(len(record.frame) for record, _entry in entries)
    packed = sum(len(blob) for _record, entry in entries for blob in entry.pack.values())
    total = sum(path.stat().st_size for path in root.rglob("*") if path.is_file())
    return StoreBytes(**sizes, entries=entry_bytes, packed=packed, other=total - sum(sizes.values()) - entry_bytes, total=total)
