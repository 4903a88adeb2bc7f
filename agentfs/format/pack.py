"""Format 2's remote, bytes only (docs/FORMAT.md, "Remote layout"): packs, pack indexes, head keys.

A pack is a sealed segment (format/segment.py): header, one batch of records, footer, trailer. Its
records are byte-identical to the local store's (kinds in format/kinds.py). A pack's index is the
pack's own last bytes, the footer frame and the trailer, under a key of its own: a reader fetches
the index, then only the record frames it needs, by ranged reads.

A head key names a checkpoint a push moved its run's head to, and holds JSON:
`{"format": 2, "run": <run>, "id": <checkpoint id>, "packs": [<pack id>, ...]}`, the packs holding
the checkpoint's entry and what its closure needs that the pusher knew the place of. A reader
takes the packs as a hint: whatever it cannot find there, it looks up in every pack's index.
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Sequence
from typing import Any, NamedTuple

from ..errors import FormatError
from ..names import check_id, check_name
from .bounded_json import load_json
from .segment import HEADER, TRAILER, Frame, IndexEntry, batch_parts, decode_footer, decode_trailer, encode_header, encode_seal

HEAD_FORMAT = 2
PACK_ID = re.compile(r"[0-9a-f]{16}")
MAX_HEAD = 1 << 20


class Pack(NamedTuple):
    pack_id: str
    data: bytes  # the whole pack
    footer: bytes  # its last bytes, footer frame and trailer: the pack's index key holds them
    entries: list[IndexEntry]


class Head(NamedTuple):
    run: str
    checkpoint_id: str
    packs: list[str]


def new_pack_id() -> str:
    """64 random bits in 16 hex digits: two pushers never pick the same by chance (create-only catches it if they do)."""
    return secrets.token_hex(8)


def check_pack_id(pack_id: str, where: str) -> str:
    if not PACK_ID.fullmatch(pack_id):
        raise FormatError(f"{where}: {pack_id!r} is not a pack id (16 hex digits)")
    return pack_id


def encode_pack(records: Sequence[Frame], writer: bytes) -> Pack:
    """A sealed segment holding `records` in one batch; `writer` is 16 bytes naming the pushing store."""
    pack_id = new_pack_id()
    segment_id = int(pack_id, 16)
    header = encode_header(segment_id, 0, writer)
    parts, entries = batch_parts(segment_id, len(header), records)
    seal = encode_seal(segment_id, len(header) + sum(len(part) for part in parts), entries)
    return Pack(pack_id, b"".join([header, *parts, seal]), seal, entries)  # one copy of the bodies


def decode_pack_index(data: bytes, pack_id: str, where: str) -> tuple[int, list[IndexEntry]]:
    """(the pack's size, its records' kinds, keys and frame places) from the index key's bytes; refused
    unless its trailer and footer are intact and name this pack."""
    segment_id = int(check_pack_id(pack_id, where), 16)
    if len(data) < TRAILER.size:
        raise FormatError(f"{where}: {len(data)} bytes is too short for a pack index")
    footer_length = len(data) - TRAILER.size
    stated_offset = TRAILER.unpack_from(data, footer_length)[1]  # checked below: the pack's size follows from it
    sealed = decode_trailer(data[footer_length:], stated_offset + len(data))
    if sealed is None or sealed[1] != footer_length or sealed[0] < HEADER.size:
        raise FormatError(f"{where}: not a pack index (no intact trailer)")
    footer_offset = sealed[0]
    return footer_offset + len(data), decode_footer(data[:footer_length], segment_id, footer_offset, where)


def encode_head(run: str, checkpoint_id: str, packs: Sequence[str]) -> bytes:
    return json.dumps({"format": HEAD_FORMAT, "run": run, "id": checkpoint_id, "packs": sorted(set(packs))}).encode()


def decode_head(data: bytes, run: str, checkpoint_id: str, where: str) -> Head:
    """A head key's content, refused unless it is format 2's and names the run and id its key does."""
    fields: Any = load_json(data, where, max_bytes=MAX_HEAD)
    if not isinstance(fields, dict) or fields.get("format") != HEAD_FORMAT:
        raise FormatError(f"{where} is not a format-{HEAD_FORMAT} head key")
    if fields.get("run") != run or fields.get("id") != checkpoint_id:
        raise FormatError(f"{where} names {fields.get('run')!r}@{fields.get('id')!r}, not the checkpoint its key names")
    packs = fields.get("packs")
    if not isinstance(packs, list) or not all(isinstance(p, str) for p in packs):
        raise FormatError(f"{where}: its packs are not a list of pack ids")
    return Head(check_name(run), check_id(checkpoint_id), [check_pack_id(p, where) for p in packs])
