"""A bounded cache of objects' verified bytes, by id, for the readers of checkpoints.

Serving from it is safe because objects are content-addressed: an id is the sha256 (or an encrypted store's
keyed id) of the very bytes kept under it, checked when they were read, or computed from them by the writer
that stored them. Only checkpoint readers use it; verify, push and gc read
the disk every time, which is what they are for.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import NamedTuple

from ..format.refs import TreeChild


class ObjectCache:
    """Objects of `largest` bytes or fewer, the least recently used dropped past `capacity` bytes in all."""

    def __init__(self, capacity: int, largest: int) -> None:
        self.capacity = capacity
        self.largest = largest
        self._held: OrderedDict[bytes, bytes] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, oid: bytes, read: Callable[[bytes], bytes]) -> bytes:
        """The object's bytes: kept ones, else what `read(oid)` returns verified (kept if small enough)."""
        with self._lock:
            data = self._held.get(oid)
            if data is not None:
                self._held.move_to_end(oid)
                return data
        data = read(oid)  # outside the lock: other threads' hits do not wait for this read
        self.keep(oid, data)
        return data

    def keep(self, oid: bytes, data: bytes | memoryview) -> None:
        """Keep `data` under `oid` if it is small enough: bytes read and verified, or computed from by this process
        (a writer's chunk: ObjectWriter.keep)."""
        if len(data) <= self.largest:
            self._keep(oid, bytes(data))

    def get_many(self, oids: list[bytes], read_many: Callable[[list[bytes]], list[bytes | None]]) -> list[bytes | None]:
        """Each object's bytes: kept ones, else what one `read_many(missing)` call returns verified (kept if small
        enough), None where it returns None."""
        with self._lock:
            found = [self._held.get(oid) for oid in oids]
            for oid, data in zip(oids, found, strict=True):
                if data is not None:
                    self._held.move_to_end(oid)
        missing = [position for position, data in enumerate(found) if data is None]
        if missing:
            for position, data in zip(missing, read_many([oids[position] for position in missing]), strict=True):
                found[position] = data
                if data is not None:
                    self.keep(oids[position], data)
        return found

    def _keep(self, oid: bytes, data: bytes) -> None:
        with self._lock:
            if oid in self._held:  # another thread read it meanwhile
                return
            self._held[oid] = data
            self._bytes += len(data)
            while self._bytes > self.capacity:
                self._bytes -= len(self._held.popitem(last=False)[1])

    def held_bytes(self) -> int:
        with self._lock:
            return self._bytes


class NodeSpan(NamedTuple):
    """A tree node as a level of a tree holds it: the node ([id, size]) and how many children of the level below it groups."""

    node: TreeChild
    children: int


class HeldTree(NamedTuple):
    """A chunk tree this process committed: its root id, its chunks, and its nodes level by level from the chunks up."""

    root: bytes
    leaves: list[TreeChild]
    levels: list[list[NodeSpan]]


class HeldTrees:
    """The chunks ([id, size] each) and nodes of the last few chunk trees this process committed, by the tree's root id.

    Each is a promise that the store holds those chunks and nodes, durably as the store's durability asks: the
    commit that wrote the tree stored or checked every one (ObjectWriter.reuse) and had returned. An `Extend` of
    that tree then reuses them without looking each up (core/extend.py), and the nodes over its kept chunks
    without encoding and hashing them again (objects/blobs.py, BlobWriter.put_after)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._held: OrderedDict[bytes, HeldTree] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, root: bytes) -> HeldTree | None:
        with self._lock:
            tree = self._held.get(root)
            if tree is not None:
                self._held.move_to_end(root)
            return tree

    def add(self, trees: list[HeldTree]) -> None:
        with self._lock:
            for tree in trees:
                self._held[tree.root] = tree
                self._held.move_to_end(tree.root)
            while len(self._held) > self.capacity:
                self._held.popitem(last=False)


class HeldList(NamedTuple):
    """The latest list value committed under one (run, key): its blob's id and its encoded bytes."""

    oid: bytes
    data: bytes


class HeldLists:
    """The encoded bytes of the latest list value this process committed under each (run, key), up to
    `capacity` bytes in all (the least recently committed dropped first).

    A commit of a whole list whose bytes begin with those of the list its parent holds under the same key
    is then stored as an `Extend` of it, found by comparing bytes instead of cutting and hashing them all
    (core/extend.py, grown_ref). The bytes are the commit's own, never read back: nothing here is trusted
    that this process did not encode itself."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self._held: OrderedDict[tuple[str, str], HeldList] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, run: str, key: str) -> HeldList | None:
        with self._lock:
            return self._held.get((run, key))

    def add(self, run: str, key: str, oid: bytes, data: bytes) -> None:
        """Hold `data`, the bytes of the list `oid` just committed under (`run`, `key`), in place of the one before."""
        with self._lock:
            old = self._held.pop((run, key), None)
            if old is not None:
                self._bytes -= len(old.data)
            if len(data) > self.capacity:
                return
            self._held[(run, key)] = HeldList(oid, data)
            self._bytes += len(data)
            while self._bytes > self.capacity:
                self._bytes -= len(self._held.popitem(last=False)[1].data)
