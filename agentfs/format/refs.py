"""Blob references: how a manifest points at bytes.

A ref is a msgpack array whose first item is its kind:
  [INLINE, data]                      the bytes themselves (tiny values)
  [PACKED, oid, size]                 an object packed inside the same log entry
  [PACKED, oid, size, run, id]        an object packed inside another log entry
  [LOOSE, oid, size]                  objects/<oid>
  [TREE, oid, size, depth]            objects/<oid> is a tree node: [[oid, size], ...] of chunks
                                      (depth 1) or of nodes one level down
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import msgpack

from ..errors import FormatError
from ..names import check_id, check_name

INLINE, PACKED, LOOSE, TREE = 0, 1, 2, 3
INLINE_MAX = 64
PACK_MAX = 16 << 10
NODE_MIN, NODE_MAX = 4, 512
NODE_BOUNDARY = 16  # a node ends after a child whose oid's first byte is 0 mod this (once it has NODE_MIN)
MAX_DEPTH = 8

Ref = list[Any]
Location = tuple[str, str]  # (run, checkpoint id) of a log entry
ReadPacked = Callable[[bytes, Location], bytes]


def check_ref(ref: Any, where: str) -> Ref:
    """`ref` if well formed; refs come from files that may have been tampered with."""
    ok = isinstance(ref, list) and ref and isinstance(ref[0], int)
    if ok and ref[0] == INLINE:
        ok = len(ref) == 2 and isinstance(ref[1], bytes) and len(ref[1]) <= INLINE_MAX
    elif ok and ref[0] in (PACKED, LOOSE, TREE):
        ok = len(ref) >= 3 and isinstance(ref[1], bytes) and len(ref[1]) == 32
        ok = ok and isinstance(ref[2], int) and ref[2] >= 0
        if ok and ref[0] == PACKED and len(ref) == 5:
            ok = isinstance(ref[3], str) and isinstance(ref[4], str)
            if ok:
                check_name(ref[3], "run")
                check_id(ref[4])
        elif ok and ref[0] == TREE:
            ok = len(ref) == 4 and isinstance(ref[3], int) and 1 <= ref[3] <= MAX_DEPTH
        elif ok:
            ok = len(ref) == 3
    else:
        ok = False
    if not ok:
        raise FormatError(f"{where}: malformed blob reference {str(ref)[:120]}")
    return ref


def ref_size(ref: Ref) -> int:
    return len(ref[1]) if ref[0] == INLINE else ref[2]


def located(ref: Ref, home: Location) -> Ref:
    """The same ref, valid from any entry: a packed object keeps the address of its entry."""
    if ref[0] == PACKED and len(ref) == 3:
        return [PACKED, ref[1], ref[2], home[0], home[1]]
    return ref



def parse_node(data: bytes, oid: bytes, where: str) -> list[list[Any]]:
    """A tree node's children [[oid, size], ...], from its verified bytes."""
    try:
        children = msgpack.unpackb(data, raw=False, use_list=True)
    except (ValueError, msgpack.UnpackException) as exc:
        raise FormatError(f"{where}: tree node {oid.hex()} is malformed: {exc}") from None
    valid = isinstance(children, list) and all(
        isinstance(c, list) and len(c) == 2 and isinstance(c[0], bytes) and len(c[0]) == 32 and isinstance(c[1], int) and c[1] >= 0
        for c in children
    )
    if not valid or not children:
        raise FormatError(f"{where}: tree node {oid.hex()} is malformed")
    return children


def encode_node(children: list[list[Any]]) -> bytes:
    """A tree node's bytes: its children [[oid, size], ...] as a msgpack array."""
    return msgpack.packb(children, use_bin_type=True)
