"""Blob references: how a manifest points at bytes.

On disk a ref is a msgpack array whose first item is its kind; in memory it is one of four typed values:
  [INLINE, data]                      InlineRef(data): the bytes themselves (tiny values)
  [PACKED, oid, size]                 PackedRef(oid, size): an object packed inside the same log entry
  [PACKED, oid, size, run, id]        PackedRef(oid, size, (run, id)): inside another log entry
  [LOOSE, oid, size]                  LooseRef(oid, size): an OBJECT record (objects/<oid> in format 1)
  [TREE, oid, size, depth]            TreeRef(oid, size, depth): oid is a tree node: [[oid, size], ...] of
                                      chunks (depth 1) or of nodes one level down
`decode_ref` is the one place an array becomes a typed ref (checked: it may come from a tampered file),
`encode_ref` the one place a typed ref becomes an array again; the bytes are the same both ways.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

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


EntryAddress = tuple[str, str]  # (run, checkpoint id) of a log entry (not engine/segments.py's FrameLocation, a place in a file)

# The typed refs are named tuples, not frozen dataclasses: a manifest decodes two per value (its ValueRef and
# blob ref), and a tuple is made in about half the time; with frozen dataclasses Manifest.from_bytes of 30
# values took twice as long as with lists. Hazards: a tuple packs as a msgpack array without its kind, so a
# ref reaches msgpack only through encode_ref (Manifest.to_bytes); and tuples compare by their items, so a
# LooseRef equals a TreeChild of the same oid and size: compare refs with refs (same_bytes).


class InlineRef(NamedTuple):
    """The blob's bytes themselves, at most INLINE_MAX."""

    data: bytes

    @property
    def size(self) -> int:
        return len(self.data)


class PackedRef(NamedTuple):
    """An object packed inside a log entry: `entry`'s, or (None) the entry holding this ref."""

    oid: bytes
    size: int
    entry: EntryAddress | None = None


class LooseRef(NamedTuple):
    """An object in one piece, its own OBJECT record."""

    oid: bytes
    size: int


class TreeRef(NamedTuple):
    """A chunk tree: `oid` is its root node, `depth` levels above the chunks (1: its children are chunks)."""

    oid: bytes
    size: int
    depth: int


Ref = InlineRef | PackedRef | LooseRef | TreeRef


class TreeChild(NamedTuple):
    """One child of a tree node: a chunk's id (the node at depth 1) or a node's one level down, and the bytes
    below it. A tuple, so a node's children pack as msgpack arrays [[oid, size], ...] as they are."""

    oid: bytes
    size: int


ReadPacked = Callable[[bytes, EntryAddress], bytes]


# Decoders build the named tuples with tuple.__new__, every field given and checked: a named tuple's own
# __new__ (argument binding, defaults) is slower, and a manifest decodes two per value, so with it a 31-value
# manifest took 117 us to decode where the untyped lists had taken 74 us (Manifest.from_bytes of a manifest
# of 30 packed values and an artifact, timeit, best of 5).
tuple_new = tuple.__new__


def decode_ref(raw: Any, where: str) -> Ref:
    """The typed ref of the msgpack array `raw`, refused unless well formed: refs come from files that may have
    been tampered with (tests/format/test_blob_references.py, test_malformed_refs_are_refused)."""
    kind = raw[0] if isinstance(raw, list) and raw and isinstance(raw[0], int) else None
    if kind == INLINE:
        if len(raw) == 2 and isinstance(raw[1], bytes) and len(raw[1]) <= INLINE_MAX:
            return tuple_new(InlineRef, (raw[1],))
    elif kind in (PACKED, LOOSE, TREE) and len(raw) >= 3:
        oid, size = raw[1], raw[2]
        if isinstance(oid, bytes) and len(oid) == 32 and isinstance(size, int) and size >= 0:
            if kind == PACKED and len(raw) == 5:
                run, checkpoint_id = raw[3], raw[4]
                if isinstance(run, str) and isinstance(checkpoint_id, str):
                    return tuple_new(PackedRef, (oid, size, (check_name(run, "run"), check_id(checkpoint_id))))
            elif kind == TREE:
                if len(raw) == 4 and isinstance(raw[3], int) and 1 <= raw[3] <= MAX_DEPTH:
                    return tuple_new(TreeRef, (oid, size, raw[3]))
            elif len(raw) == 3:
                return tuple_new(PackedRef, (oid, size, None)) if kind == PACKED else tuple_new(LooseRef, (oid, size))
    raise FormatError(f"{where}: malformed blob reference {str(raw)[:120]}")


def encode_ref(ref: Ref) -> list[Any]:
    """The msgpack array of a typed ref (decode_ref's inverse)."""
    if isinstance(ref, InlineRef):
        return [INLINE, ref.data]
    if isinstance(ref, PackedRef):
        return [PACKED, ref.oid, ref.size] if ref.entry is None else [PACKED, ref.oid, ref.size, *ref.entry]
    if isinstance(ref, LooseRef):
        return [LOOSE, ref.oid, ref.size]
    return [TREE, ref.oid, ref.size, ref.depth]


def same_bytes(a: Ref, b: Ref) -> bool:
    """Whether two refs name the same bytes, nothing read: the same inline bytes, or the same object id wherever
    it is packed. Hazard: the same bytes cut with other chunking parameters get another tree id, and differ here."""
    if isinstance(a, InlineRef) or isinstance(b, InlineRef):
        return a == b
    return a.oid == b.oid


def located(ref: Ref, home: EntryAddress) -> Ref:
    """The same ref, valid from any entry: a packed object keeps the address of its entry."""
    if isinstance(ref, PackedRef) and ref.entry is None:
        return PackedRef(ref.oid, ref.size, home)
    return ref


def parse_node(data: bytes, oid: bytes, where: str) -> list[TreeChild]:
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
    return [TreeChild(child, size) for child, size in children]


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


def encode_node(children: Sequence[TreeChild]) -> bytes:
    """A tree node's bytes: its children [[oid, size], ...] as a msgpack array."""
    return msgpack.packb(children, use_bin_type=True)
