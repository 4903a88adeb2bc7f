"""LINEAGE records: a run's shape within one sealed segment, so that its heads are found without its manifests.

A writer that knows the parent of every entry of a run it appended to a segment (it committed them all) writes,
just before it seals the segment, one LINEAGE record for that run (docs/FORMAT.md, "Lineage records"):

    key   run NUL a fresh ULID
    body  msgpack {"format": 1, "segment": id, "rows": n, "leaves": [id...], "outside": [id...]}

`segment` is the id of the segment it was written into (a copy elsewhere, by a compaction of an agentfs that keeps
records of kinds it does not know, speaks of other entries: readers do not use it); `rows` is the number of the
run's ENTRY records in the segment (copies included: the footer's row count for
(ENTRY, run)); `leaves` are the ids among them that none of them names as parent; `outside` the parents they name
that are not among them. The record is a hint for listing heads: nothing that keeps data safe reads it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import NamedTuple, TypeGuard

import msgpack

from ..errors import FormatError
from ..ids import new_id
from ..names import ID
from . import kinds
from .footer import IndexEntry
from .segment import Record

VERSION = 1


class Parent(NamedTuple):
    """The parent an entry's manifest names (None: the run's first checkpoint), as its writer passes it down."""

    id: str | None


class EntryParent(NamedTuple):
    """What a writer knows of an ENTRY record it appends: its run (the plain name) and the parent its manifest names."""

    run: str
    parent: str | None


class Lineage(NamedTuple):
    segment: int  # the id of the segment it speaks of: the one it was written into
    rows: int  # the run's ENTRY records in the segment, each copy counted (its footer rows)
    leaves: list[str]  # ids there that no entry there names as parent, sorted
    outside: list[str]  # parents named there that lie elsewhere, sorted


def summarize(segment: int, rows: int, parents: Iterable[tuple[str, str | None]]) -> Lineage:
    """The lineage of `rows` entry records of segment `segment` whose (id, parent) pairs are `parents`."""
    pairs = dict(parents)
    named = {parent for parent in pairs.values() if parent is not None}
    return Lineage(segment, rows, sorted(pairs.keys() - named), sorted(named - pairs.keys()))


def lineage_records(segment: int, entries: Iterable[IndexEntry], parents: Mapping[bytes, EntryParent]) -> list[Record]:
    """The LINEAGE records (plain keys) of segment `segment`, whose records are `entries` (keys as stored): one for each
    run whose every ENTRY record there `parents` names (by key as stored: the writer appended it); a run with others
    (an adopted segment's, a compaction's copies) gets none, and readers read those entries' manifests instead."""
    keys_of: dict[bytes, list[bytes]] = {}
    for entry in entries:
        if entry.kind == kinds.ENTRY:
            keys_of.setdefault(entry.key.partition(b"\0")[0], []).append(entry.key)
    records = []
    for keys in keys_of.values():
        known = [parents[key] for key in keys if key in parents]
        if len(known) < len(keys):
            continue
        pairs = [(key.partition(b"\0")[2].decode(), parent.parent) for key, parent in zip(keys, known, strict=True)]
        body = encode_lineage(summarize(segment, len(keys), pairs))
        records.append(Record(kinds.LINEAGE, kinds.pair_key(known[0].run, new_id()), body))
    return records


def encode_lineage(lineage: Lineage) -> bytes:
    body = {"format": VERSION, "segment": lineage.segment, "rows": lineage.rows, "leaves": lineage.leaves, "outside": lineage.outside}
    return msgpack.packb(body, use_bin_type=True)


def decode_lineage(data: bytes, where: str) -> Lineage:
    """A LINEAGE record's body, refused (FormatError naming `where`) unless every field has its type and every id is a ULID."""
    try:
        body = msgpack.unpackb(data, raw=False, strict_map_key=True)
    except (ValueError, TypeError, msgpack.UnpackException) as exc:
        raise FormatError(f"lineage record {where} is malformed: {exc}") from None
    if not isinstance(body, dict) or body.get("format") != VERSION:
        found = str(body.get("format"))[:20] if isinstance(body, dict) else type(body).__name__
        raise FormatError(f"lineage record {where} has record format {found}, this agentfs reads {VERSION}")
    segment, rows, leaves, outside = body.get("segment"), body.get("rows"), body.get("leaves"), body.get("outside")
    if not _count(segment) or not _count(rows) or not isinstance(leaves, list) or not isinstance(outside, list):
        raise FormatError(f"lineage record {where} is malformed: segment, rows, leaves or outside missing or of another type")
    if not leaves or len(leaves) > rows or not all(isinstance(i, str) and ID.fullmatch(i) for i in [*leaves, *outside]):
        raise FormatError(f"lineage record {where} is malformed: its leaves or outside parents are not ULIDs")
    return Lineage(segment, rows, leaves, outside)


def _count(value: object) -> TypeGuard[int]:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0
