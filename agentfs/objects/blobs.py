"""Blobs: values and files stored as inline bytes, objects packed into a log entry, or chunk trees (see format.refs)."""

from __future__ import annotations

import queue
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Executor, Future
from typing import IO, Any, Protocol

from ..engine.object_cache import HeldTree, NodeSpan
from ..engine.object_store import ObjectStore, ObjectWriter
from ..errors import FormatError, SerializationError
from ..format import chunking, codec
from ..format.manifest import MAX_VALUE
from ..format.refs import (
    INLINE_MAX,
    MAX_DEPTH,
    PACK_MAX,
    EntryAddress,
    InlineRef,
    LooseRef,
    PackedRef,
    ReadPacked,
    Ref,
    TreeChild,
    TreeRef,
    encode_node,
    node_ends,
    parse_node,
)
from ..format.segment import Record


class TreeTooDeep(SerializationError):
    """A blob whose chunk tree would be deeper than readers accept (format.refs.MAX_DEPTH); the commit names the value."""


class BlobWriter:
    """Stores the blobs of one commit: tiny inline, small packed into the entry, the rest chunked.

    `new_writer` makes the ObjectWriter for chunks and tree nodes, on the first one: a commit of
    small values writes none, and does not pay for the writer."""

    def __init__(self, new_writer: Callable[[], ObjectWriter], reuse: dict[bytes, Ref], hasher: codec.Hasher = codec.hash_bytes) -> None:
        self._new_writer = new_writer
        self.hasher = hasher  # the store's object ids (keyed in an encrypted store)
        self._writer: ObjectWriter | None = None
        self.reuse = reuse  # oid -> located ref already in the store (the parent's values)
        self.pack: dict[bytes, bytes] = {}
        self.trees: list[HeldTree] = []  # the trees put_after made

    @property
    def writer(self) -> ObjectWriter:
        if self._writer is None:
            self._writer = self._new_writer()
        return self._writer

    def finish(self) -> list[Record]:
        """Wait for every object; the records the entry's batch must carry (ObjectWriter.finish)."""
        return [] if self._writer is None else self._writer.finish()

    def put(self, data: bytes, params: chunking.ChunkParams | None = None) -> Ref:
        if len(data) <= INLINE_MAX:
            return InlineRef(bytes(data))
        if len(data) <= PACK_MAX:
            oid = self.hasher(data)
            if oid in self.reuse:
                return self.reuse[oid]
            if oid not in self.pack:
                self.pack[oid] = codec.encode(data, in_entry=True)
            return PackedRef(oid, len(data))
        if params is None:
            params = chunking.LARGE if len(data) > chunking.LARGE_VALUE else chunking.SMALL
        return self._tree(chunking.cut_bytes(params, data))

    def holds(self, oids: Iterable[bytes]) -> bool:
        """Whether the store holds every object of `oids` (each made durable, as add() does): a blob may refer to them unwritten."""
        return all(self.writer.reuse(oid) for oid in oids)

    def put_after(
        self, kept: list[TreeChild], kept_size: int, tail: bytes, params: chunking.ChunkParams, base: HeldTree | None = None
    ) -> Ref:
        """The ref of a blob whose first chunks are `kept` ([id, size] each, `kept_size` bytes in all, which the store
        `holds`) and whose remaining bytes, `tail`, are cut with `params`: that of the whole blob when `kept` are its
        chunks up to a final cut (core/extend.py). `base`: a tree this process committed whose chunks begin with
        `kept`; its nodes over them are taken as they are (_group)."""
        cut = list(chunking.cut_bytes(params, tail))
        pending = [(self.writer.add_later(chunk), len(chunk)) for chunk in cut]
        leaves = kept + [TreeChild(oid if isinstance(oid, bytes) else oid.result(), size) for oid, size in pending]
        for chunk, leaf in zip(cut, leaves[len(kept) :], strict=True):
            # the next extension reads the last of them again (core/extend.py): from memory, not the segment
            self.writer.keep(leaf.oid, chunk)
        levels: list[list[NodeSpan]] = []
        ref = self._root(leaves, levels, [] if base is None else base.levels, len(kept), kept_size + len(tail))
        self.trees.append(HeldTree(ref.oid, leaves, levels))
        return ref

    def put_stream(self, stream: IO[Any]) -> Ref:
        head = stream.read(PACK_MAX + 1)
        if not isinstance(head, bytes):
            raise SerializationError(f"artifact stream returned {type(head).__name__}, not bytes: open the file in binary mode")
        if len(head) <= PACK_MAX:
            return self.put(head, chunking.LARGE)
        return self._root(self._stream_chunks(stream, head))

    def _stream_chunks(self, stream: IO[Any], head: bytes) -> list[TreeChild]:
        """(id, size) of each chunk of `stream` (whose first bytes, `head`, were read from it already).

        A failure (a read of the stream, a job on the pool) stops the commit with no job of it left running:
        nothing is appended once the error is raised (tests/objects/test_artifact_failures.py)."""
        stored: list[tuple[Future[list[bytes]], list[int]]] = []
        try:
            self._store_stream(stream, head, stored)
            leaves = [TreeChild(oid, size) for future, sizes in stored for oid, size in zip(future.result(), sizes, strict=True)]
        except BaseException:
            self.writer.abandon()
            raise
        self.writer.send_gathered()
        return leaves

    def _store_stream(self, stream: IO[Any], head: bytes, stored: list[tuple[Future[list[bytes]], list[int]]]) -> None:
        """Hand each chunk of `stream` to the pool, appending the jobs to `stored` (with their chunks' sizes).

        It is read into STREAM_BLOCKS blocks in turn; each block's chunks are stored on the pool, in
        jobs of STREAM_GROUP bytes or more, straight from the block (never copied), and the block is
        read into again once they are: memory stays bounded and the pool busy. A job that failed stops
        the reading at the next block."""
        params = chunking.LARGE
        blocks = _Blocks(first=2 * params.max_size)
        carry: bytes | memoryview = head  # the bytes past the previous block's last cut
        previous: _Block | None = None
        checked = 0  # jobs seen done without an error
        ended = False
        while not ended:
            block = blocks.take()
            block.hold()  # until the bytes past its last cut are copied into the next block
            block.view[: len(carry)] = carry
            filled = len(carry) + _fill(stream, block.view[len(carry) :])
            if previous is not None:
                previous.release()
            ended = filled < len(block.view)
            chunks, covered = chunking.cut_block(params, block.view[:filled], ended)
            for group in _groups(chunks):
                block.hold()
                stored.append((self.writer.add_all_later(group, block.release), [len(chunk) for chunk in group]))
            carry, previous = block.view[covered:filled], block
            while checked < len(stored) and stored[checked][0].done():
                stored[checked][0].result()  # raises the job's error now, not once the whole stream is read
                checked += 1
        if previous is not None:
            previous.release()

    def _tree(self, chunks: Iterator[memoryview]) -> Ref:
        """A chunk tree of views of immutable bytes (cut_bytes): handed to the pool uncopied."""
        pending = [(self.writer.add_later(chunk), len(chunk)) for chunk in chunks]
        return self._root([TreeChild(oid if isinstance(oid, bytes) else oid.result(), size) for oid, size in pending])

    def _root(
        self,
        level: list[TreeChild],
        levels: list[list[NodeSpan]] | None = None,
        base: Sequence[list[NodeSpan]] = (),
        same: int = 0,
        size: int | None = None,
    ) -> LooseRef | TreeRef:
        """The ref of a blob whose chunks are `level` (in order), `size` bytes in all (summed here if None): LOOSE or a
        tree above them. `levels`, when given, gets the tree's nodes level by level; `base`: those of a tree whose
        chunks begin with `same` of these."""
        if size is None:
            size = sum(child.size for child in level)
        if len(level) == 1:
            return LooseRef(level[0].oid, size)
        depth = 0
        while len(level) > 1:
            depth += 1
            # readers refuse a deeper ref: refused here, not committed unreadable (tests/objects/test_chunk_tree_bounds.py)
            if depth > MAX_DEPTH:
                raise TreeTooDeep(
                    f"its {size:,} bytes need a chunk tree deeper than the {MAX_DEPTH} levels agentfs reads "
                    f"({len(level):,} nodes at depth {MAX_DEPTH})"
                )
            spans, same = self._group(level, base[depth - 1] if depth <= len(base) else [], same)
            if levels is not None:
                levels.append(spans)
            level = [span.node for span in spans]
        return TreeRef(level[0].oid, size, depth)

    def _group(self, children: list[TreeChild], base: list[NodeSpan], same: int) -> tuple[list[NodeSpan], int]:
        """The nodes over `children`, and how many of them are `base`'s: the nodes a level of another tree made over
        children of which the first `same` are these. Where a node ends depends on the children up to its end only
        (node_ends), so each of base's nodes over those children is this level's too, but its last: that one ended
        with its level, not by node_ends. Taken as they are, they are neither encoded nor hashed again (a growing
        list's commit regroups only its last nodes; tests/core/test_grown_list.py compares each ref with a fresh
        store's)."""
        nodes: list[NodeSpan] = []
        start = 0
        for span in base[:-1]:
            if start + span.children > same:
                break
            nodes.append(span)
            start += span.children
        reused = len(nodes)
        current: list[TreeChild] = []
        previous_size = children[start - 1].size if start else -1
        for child in children[start:]:
            current.append(child)
            ends = node_ends(len(current), child.size, previous_size)
            previous_size = child.size
            if ends:
                nodes.append(NodeSpan(self._node(current), len(current)))
                current = []
        if current:
            nodes.append(NodeSpan(self._node(current), len(current)))
        return nodes, reused

    def _node(self, children: list[TreeChild]) -> TreeChild:
        return TreeChild(self.writer.add(encode_node(children)), sum(child.size for child in children))


# a stream is read STREAM_BLOCK bytes at a time into one of STREAM_BLOCKS blocks, and its chunks stored in
# jobs of STREAM_GROUP bytes or more: 16 MiB held, and at the end of a stream a job short enough that
# the pool's threads finish together
STREAM_BLOCK = 4 << 20
STREAM_BLOCKS = 4
STREAM_GROUP = 1 << 20


class _Block:
    """A buffer a stream is read into, read into again only once nobody holds it: each pool job storing
    chunks cut from it, and the reader until it has copied the bytes past its last cut."""

    def __init__(self, size: int, free: queue.SimpleQueue[_Block]) -> None:
        self.view = memoryview(bytearray(size))
        self._free = free
        self._holders = 0
        self._lock = threading.Lock()

    def hold(self) -> None:
        with self._lock:
            self._holders += 1

    def release(self) -> None:
        with self._lock:
            self._holders -= 1
            if self._holders:
                return
        self._free.put(self)


class _Blocks:
    """The blocks one stream is read into, made as they are needed (at most STREAM_BLOCKS). A short stream
    makes one, of `first` bytes: room for what is left past a block's last cut (under a chunk's greatest
    size) and a chunk of the greatest size, so that each block read holds a cut."""

    def __init__(self, first: int) -> None:
        self.free: queue.SimpleQueue[_Block] = queue.SimpleQueue()
        self.sizes = [first] + [STREAM_BLOCK] * (STREAM_BLOCKS - 1)  # of the blocks not made yet

    def take(self) -> _Block:
        if self.sizes and self.free.empty():
            return _Block(self.sizes.pop(0), self.free)
        return self.free.get()  # waits for the pool to store the chunks of a block


def _fill(stream: IO[Any], buffer: memoryview) -> int:
    """Read into `buffer` until it is full or the stream ends; the bytes read."""
    readinto = getattr(stream, "readinto", None)
    filled = 0
    while filled < len(buffer):
        if readinto is not None:
            count = readinto(buffer[filled:]) or 0
        else:
            data = stream.read(len(buffer) - filled)
            count = len(data)
            buffer[filled : filled + count] = data
        if count == 0:
            return filled
        filled += count
    return filled


def _groups(chunks: list[memoryview]) -> Iterator[list[memoryview]]:
    """Runs of consecutive chunks of STREAM_GROUP bytes or more (the last one may be less)."""
    group: list[memoryview] = []
    size = 0
    for chunk in chunks:
        group.append(chunk)
        size += len(chunk)
        if size >= STREAM_GROUP:
            yield group
            group, size = [], 0
    if group:
        yield group


class BlobReader:
    """Reads blobs, verified; a tree's large chunks are read and decompressed READ_AHEAD ahead on `pool`.

    Small objects (a value's chunks, tree nodes, packed objects) come through the store's ObjectCache: a
    checkpoint read again, or the next one of a growing conversation, reads from disk only what is new."""

    # chunks read ahead of the caller: at most this many times the largest chunk held (6 MiB with chunking.LARGE)
    READ_AHEAD = 8
    # bytes: a chunk this big or smaller (every chunk of a value cut with chunking.SMALL) is read by the caller's
    # thread: its read costs less than a trip through the pool, and a cold pool first starts its threads
    # (a 1,000-message conversation's 105 chunks: 2.7 ms through the pool once its threads ran, 1.7 ms here;
    # starting the threads took up to 11 ms more on a loaded 2-core machine)
    READ_HERE = 32 << 10
    # small objects read together (_read_ahead): one descriptor use and no per-object bookkeeping for a value's
    # chunks; at most this many read before the first of them is returned (2 MiB of chunking.SMALL chunks)
    SMALL_BATCH = 64

    def __init__(self, db: ObjectStore, read_packed: ReadPacked, pool: Callable[[], Executor]) -> None:
        self.db = db
        self.read_packed = read_packed
        # the store's pool, looked up at each read: a stream opened before the store was closed reads on
        self.pool = pool

    def chunks(self, ref: Ref, home: EntryAddress, where: str) -> Iterator[bytes]:
        """The blob's bytes, a verified chunk at a time, never more than its reference claims: each tree node's
        children must add up to the size its parent (or the reference) gives it before any is read, and each
        chunk must be the size its node gives it (tests/objects/test_chunk_tree_bounds.py)."""
        total = 0
        for chunk in self._chunks(ref, home, where):
            total += len(chunk)
            if total > ref.size:
                raise FormatError(f"{where}: blob holds over {total} bytes, its reference says {ref.size}")
            yield chunk
        if total != ref.size:
            raise FormatError(f"{where}: blob holds {total} bytes, its reference says {ref.size}")

    def _chunks(self, ref: Ref, home: EntryAddress, where: str) -> Iterator[bytes]:
        if isinstance(ref, InlineRef):
            yield ref.data
        elif isinstance(ref, PackedRef):
            entry = home if ref.entry is None else ref.entry
            yield self.db.cache.get(ref.oid, lambda oid: self.read_packed(oid, entry))
        elif isinstance(ref, LooseRef):
            yield self.db.cache.get(ref.oid, self.db.read)
        else:
            yield from self._read_ahead(self._leaves(ref.oid, ref.depth, ref.size, where), where)

    def _leaves(self, oid: bytes, depth: int, size: int, where: str, node: bytes | None = None) -> Iterator[tuple[bytes, int]]:
        """(id, size) of a tree's chunks, in order; the node `oid` (its bytes `node`, if read) must hold `size` bytes in all."""
        # a corrupt node is an IntegrityError from the read, not a malformed one (as ObjectStore.read_node)
        children = parse_node(self.db.cache.get(oid, self.db.read) if node is None else node, oid, where)
        if sum(child_size for _child, child_size in children) != size:
            held = sum(child_size for _child, child_size in children)
            raise FormatError(f"{where}: tree node {oid.hex()} lists {held} bytes of children where {size} are claimed")
        if depth == 1:
            yield from children
            return
        for start in range(0, len(children), self.SMALL_BATCH):  # the nodes below read together, as small chunks are
            group = children[start : start + self.SMALL_BATCH]
            nodes = self.db.cache.get_many([child for child, _size in group], self.db.read_first_copies)
            for (child_oid, child_size), child_node in zip(group, nodes, strict=True):
                yield from self._leaves(child_oid, depth - 1, child_size, where, child_node)

    def _read_ahead(self, leaves: Iterator[tuple[bytes, int]], where: str) -> Iterator[bytes]:
        """The objects' bytes in order, each the size its node claims; large ones held here are read and
        verified on the pool, READ_AHEAD ahead.

        Small ones (or ones this process's index does not place) are read by the caller's thread, up to
        SMALL_BATCH consecutive ones together (ObjectStore.read_first_copies); one that is not read sound
        there is read again by ObjectStore.read when its turn comes, which refreshes the index, passes over
        a damaged copy, fetches it from the remote or raises (tests/objects/test_read_path.py)."""
        ahead: deque[tuple[bytes, int, bytes | Future[bytes] | None]] = deque()
        small: list[tuple[bytes, int]] = []
        try:
            for oid, size in leaves:
                if size <= self.READ_HERE or self.db.index.object_location(oid) is None:
                    small.append((oid, size))
                    if len(small) < self.SMALL_BATCH:
                        continue
                    self._read_small(small, ahead)
                else:
                    self._read_small(small, ahead)
                    ahead.append((oid, size, self.pool().submit(self.db.read, oid)))
                while len(ahead) > self.READ_AHEAD:
                    yield self._result(*ahead.popleft(), where)
            self._read_small(small, ahead)
            while ahead:
                yield self._result(*ahead.popleft(), where)
        finally:  # the caller stopped early (or a read failed): what is still queued is not wanted
            for _oid, _size, pending in ahead:
                if isinstance(pending, Future):
                    pending.cancel()

    def _read_small(self, small: list[tuple[bytes, int]], ahead: deque[tuple[bytes, int, bytes | Future[bytes] | None]]) -> None:
        """Read the small objects `small` together, queue them on `ahead` (None: not read sound), and empty `small`."""
        if small:
            found = self.db.cache.get_many([oid for oid, _size in small], self.db.read_first_copies)
            ahead.extend((oid, size, data) for (oid, size), data in zip(small, found, strict=True))
            small.clear()

    def _result(self, oid: bytes, size: int, pending: bytes | Future[bytes] | None, where: str) -> bytes:
        data = pending.result() if isinstance(pending, Future) else pending
        if data is None:  # not read sound with its batch: read on its own, which finds a sound copy or says why not
            data = self.db.cache.get(oid, self.db.read)
        if len(data) != size:
            raise FormatError(f"{where}: chunk {oid.hex()} holds {len(data)} bytes where its tree node claims {size}")
        return data

    def read(self, ref: Ref, home: EntryAddress, where: str) -> bytes:
        """A value's bytes, whole: refused before a byte is read if its reference claims more than the largest
        value (MAX_VALUE), which a tree repeating one chunk can claim at the cost of a few objects."""
        if ref.size > MAX_VALUE:
            raise FormatError(f"{where}: its reference claims {ref.size} bytes, over the largest value ({MAX_VALUE})")
        return b"".join(self.chunks(ref, home, where))


class BlobSource(Protocol):
    """Where a store's blobs are: its object db, and its entries for packed objects (a Repository)."""

    @property
    def db(self) -> ObjectStore: ...
    @property
    def pool(self) -> Executor: ...
    def read_packed(self, oid: bytes, location: EntryAddress) -> bytes: ...


def blob_reader(repository: BlobSource) -> BlobReader:
    """Reads the blobs of `repository`'s checkpoints: loose and tree objects from its object db, packed from its entries."""
    return BlobReader(repository.db, repository.read_packed, lambda: repository.pool)
