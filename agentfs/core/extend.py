"""`Extend`: a state value that is its parent checkpoint's list with items appended, stored at the cost of the items.

A list value is stored as its items' msgpack bytes without the array header (serialization.values, LIST_BODY),
cut by FastCDC into chunks under a tree. The parent's list extended by `items` is therefore the parent's bytes
followed by the items' bytes, and its chunks are the parent's chunks but the last (whose cuts the appended bytes
cannot move, chunking.final_cuts), then the cuts of the last chunk and the new bytes: what a commit of the whole
list would store, chunk for chunk and ref for ref (tests/core/test_extend.py compares them), found by encoding and
hashing only the new items and the parent's last chunk instead of the whole list.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NamedTuple

from ..errors import FormatError, SerializationError
from ..format import chunking
from ..format.manifest import MAX_VALUE, ValueRef
from ..format.refs import PACK_MAX, EntryAddress, LooseRef, TreeChild, TreeRef, parse_node
from ..objects.blobs import BlobWriter, blob_reader
from ..serialization import encode_body
from ..serialization.values import LIST_BODY
from .engine_api import EngineAPI


class Extend:
    """In `run.commit(state, parent=ID)`'s dict state: the parent checkpoint's list under the same key with
    `items` appended (the list `items` on a run's first commit, or when the parent has no such key).

    A reader sees an ordinary list. The commit encodes, hashes and stores the new items and the parent's
    last chunk only, whatever the list's length. `parent=` must name the head (None for an empty run):
    what is extended is known before the append, which raises Conflict if the head moved meanwhile."""

    __slots__ = ("items",)

    def __init__(self, items: Iterable[Any]) -> None:
        self.items = list(items)

    def __repr__(self) -> str:
        return f"Extend({len(self.items)} items)"


class Extension(NamedTuple):
    """An `Extend` value encoded: its items' LIST_BODY bytes and their count."""

    items: int
    data: bytes


def encode_extension(value: Extend, where: str) -> Extension:
    _fmt, count, data = encode_body(value.items, where)
    return Extension(count, data)


def grown_ref(
    store: EngineAPI, blobs: BlobWriter, base: ValueRef | None, home: EntryAddress, key: str, value: tuple[int, int, bytes], where: str
) -> ValueRef | None:
    """A whole list committed under `key` (`value`: LIST_BODY, its items, its bytes) stored as an extension of the
    parent's list `base` (at `home`), when this process committed that list and its bytes begin the new ones:
    the same ref as a commit of the whole list (tests/core/test_grown_list.py), found by comparing the bytes with
    those the process kept (HeldLists) instead of cutting and hashing them all. None when it is not so."""
    items, data = value[1], value[2]
    if base is None or base.format != LIST_BODY or not isinstance(base.blob, (LooseRef, TreeRef)) or items <= base.items:
        return None
    held = store.db.held_lists.get(home[0], key)
    if held is None or held.oid != base.blob.oid or not data.startswith(held.data):  # the id names its bytes: sizes agree
        return None
    added = Extension(items - base.items, data[len(held.data) :])
    return extended_ref(store, blobs, base, home, added, where, base_data=held.data)


def extended_ref(
    store: EngineAPI,
    blobs: BlobWriter,
    base: ValueRef | None,
    home: EntryAddress,
    added: Extension,
    where: str,
    base_data: bytes | None = None,
) -> ValueRef:
    """The ValueRef of the list `base` (the parent's value of this key, at `home`) extended by `added`; `base_data`:
    the base's bytes if this process holds them (its own commit's, HeldLists), read from the store else."""
    if base is None:
        return ValueRef(LIST_BODY, added.items, blobs.put(added.data))
    count, ref = base.items, base.blob
    if base.format != LIST_BODY:
        raise SerializationError(f"{where}: Extend appends to a list, but checkpoint {home[0]}@{home[1]} holds another value there")
    size = ref.size
    total = size + len(added.data)
    if total > MAX_VALUE:  # as for a whole value (commit_input._sized): every reader refuses a larger one
        raise SerializationError(f"{where} would be {total} bytes encoded, over the largest value ({MAX_VALUE}): make it an artifact")
    params = _params(total)
    if not isinstance(ref, (LooseRef, TreeRef)) or total <= PACK_MAX or _params(size) != params:
        # a small list (read whole for little), or one whose chunk sizes change at this commit: stored whole
        whole = base_data if base_data is not None else blob_reader(store).read(ref, home, where)
        return ValueRef(LIST_BODY, count + added.items, blobs.put(whole + added.data))
    held = store.db.held_trees.get(ref.oid)  # a tree this process committed: its chunks are held
    leaves = held.leaves if held is not None else _leaves(store, ref, where)
    if held is None and sum(length for _oid, length in leaves) != size:
        raise FormatError(f"{where}: the chunks of checkpoint {home[0]}@{home[1]}'s list add up to another size than its reference's")
    # every cut but the last is final (chunking.final_cuts): appended bytes move only the last chunk, cut again with them
    kept = chunking.final_cuts(len(leaves))
    reader = blob_reader(store)
    if held is None and not blobs.holds(oid for oid, _length in leaves[:kept]):  # a store resumed from a remote may not hold them yet
        return ValueRef(LIST_BODY, count + added.items, blobs.put(reader.read(ref, home, where) + added.data))
    kept_size = size - sum(length for _oid, length in leaves[kept:])
    if base_data is not None:
        tail = base_data[kept_size:] + added.data
    else:
        tail = b"".join(reader.read(LooseRef(oid, length), home, where) for oid, length in leaves[kept:]) + added.data
    return ValueRef(LIST_BODY, count + added.items, blobs.put_after(leaves[:kept], kept_size, tail, params, held))


def _params(size: int) -> chunking.ChunkParams:
    """The chunking BlobWriter.put gives a value of `size` bytes."""
    return chunking.LARGE if size > chunking.LARGE_VALUE else chunking.SMALL


def _leaves(store: EngineAPI, ref: LooseRef | TreeRef, where: str) -> list[TreeChild]:
    """Each chunk of a LOOSE or TREE blob, in order, from its verified tree nodes."""
    level = [TreeChild(ref.oid, ref.size)]
    if isinstance(ref, LooseRef):
        return level
    for _ in range(ref.depth):
        level = [child for oid, _size in level for child in parse_node(store.db.cache.get(oid, store.db.read), oid, where)]
    return level
