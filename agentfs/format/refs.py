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
# a tree node ends after NODE_MIN to NODE_MAX children, by node_ends: after one in NODE_BOUNDARY from NODE_MIN
# on, after one in NODE_LATE from NODE_TARGET on
NODE_MIN, NODE_TARGET, NODE_MAX = 4, 8, 512
NODE_BOUNDARY, NODE_LATE = 16, 2
MAX_DEPTH = 8
_MIX = 0x9E3779B97F4A7C15  # 2^64 / the golden ratio, odd (Fibonacci hashing): a product's top bits depend on every bit

Ref = list[Any]
EntryAddress = tuple[str, str]  # (run, checkpoint id) of a log entry (not engine/segments.py's FrameLocation, a place in a file)
ReadPacked = Callable[[bytes, EntryAddress], bytes]


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


def located(ref: Ref, home: EntryAddress) -> Ref:
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


def node_ends(count: int, size: int, previous_size: int) -> bool:
    """Whether a tree node holding `count` children ends after its last one, of `size` bytes (uncompressed),
    which follows one of `previous_size`. A writer's rule: readers never depend on it (docs/FORMAT.md, Blob references).

    Decided by the child's size, not its id: ids are keyed in an encrypted store, and ends read from ids gave
    every master key a tree of another shape. A growing value rewrites its last node of each level at every
    commit, so the store's size varied with the key: a 1,000-step conversation (benchmarks.data) stored
    +6% to +10% over plaintext for three keys, most of it in tree nodes. Sizes are the same in both stores,
    so an encrypted tree has exactly the plaintext tree's shape (tests/encryption/test_encryption.py,
    test_tree_nodes_end_where_the_plaintext_store_s_do). Chunk sizes are FastCDC's, cut from content, so ends
    stay content-defined: an edit moves only the ends near it. An observer learns that a node's last child
    has a size that mixes below a threshold: a few bits of a size that is a function of content, as every
    record's (compressed) size is ("What still leaks").

    Ends come rarely below NODE_TARGET children and often above it (as FastCDC normalizes chunk sizes): a
    growing value rewrites its last node at each commit, so its cost follows E[n^2]/E[n] of the node sizes n,
    which a tight spread keeps low. Simulated on that conversation's chunk lists over 8 mixing constants,
    node bytes plus 100 a record: 574-610 KB, against 637-1,168 KB for one end in 16 at any count (and
    645 KB for ids under sha256); inserting a chunk among 3,000 rewrites 16 children, against 21.

    The size is mixed rather than taken mod a power of two: sizes in structured data are often multiples
    of one, FastCDC's largest chunk too. A child as big as the one before never ends a node, so a run of
    equal sizes (a repeated block, cut at the same place in each copy) gets NODE_MAX children a node, not NODE_MIN,
    which would pass MAX_DEPTH beyond 4^8 chunks (tests/format/test_bytes_on_disk.py, test_equal_chunks_fill_nodes_to_512)."""
    if count >= NODE_MAX:
        return True
    if count < NODE_MIN or size == previous_size:
        return False
    mixed = ((size * _MIX) & 0xFFFF_FFFF_FFFF_FFFF) >> 32  # 32 bits
    return mixed < (1 << 32) // (NODE_LATE if count >= NODE_TARGET else NODE_BOUNDARY)


def encode_node(children: list[list[Any]]) -> bytes:
    """A tree node's bytes: its children [[oid, size], ...] as a msgpack array."""
    return msgpack.packb(children, use_bin_type=True)
