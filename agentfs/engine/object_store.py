"""Objects in segments: OBJECT records (key: the oid, body: the sealed blob), read verified.

`ObjectWriter` gathers one commit's new objects (hash and zstd on the pool, a bounded number in
flight); the commit's entry append writes them with its ENTRY record as one batch (Repository).
"""

from __future__ import annotations

import logging
import os
import threading
from collections import deque
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any, NamedTuple

from ..errors import AgentFSError, IntegrityError, ObjectMissing
from ..format import codec, kinds
from ..format.refs import parse_node
from ..format.segment import FRAME, Record, max_record_frame, record_body_unchecked
from ..format.walk import Children, Reached
from ..fsutil import drop_cached, start_writeback
from .index import Index
from .object_cache import HeldLists, HeldTrees, ObjectCache
from .segments import FrameLocation

OBJECT_FRAME_MAX = max_record_frame(kinds.OBJECT)
GROUP_KIND = bytes((kinds.GROUP,))  # a frame's kind byte, as it lies in the frame

Fetch = Callable[[bytes], bytes | None]
# the cores this process may run on: at most this many of a writer's jobs store chunks at once (_store_all)
CORES = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
# bytes: a chunk this big or smaller is hashed and compressed by the committing thread, which costs less
# than a trip through the pool (an appended-to value repeats almost all of its small chunks)
WORK_HERE = 32 << 10
Append = Callable[[Sequence[Record], bool], list[FrameLocation]]  # records, sync -> their locations
# the objects checkpoint readers keep (ObjectCache): every chunk of a value (chunking.SMALL: 16 KiB at most),
# packed objects (16 KiB) and tree nodes (22 KiB at most), up to 16 MiB in all per store
CACHE_BYTES, CACHED_OBJECT_MAX = 16 << 20, 32 << 10
# where an object read by read_first_copies lies, in the errors it discards (read() words them)
UNNAMED = "(a first copy)"
HELD_TREES = 64  # chunk trees whose chunks a commit that extends them may reuse unchecked (HeldTrees)
HELD_LISTS = 32 << 20  # bytes: the latest list values committed, whose growth a commit finds by comparing bytes (HeldLists)
log = logging.getLogger("agentfs")


class ObjectStore:
    """The store's objects: `index` says where they lie, `append` adds records, `make_durable` syncs another writer's."""

    def __init__(
        self,
        index: Index,
        append: Append,
        make_durable: Callable[[FrameLocation], None],
        *,
        sync_writes: bool,
        hasher: codec.Hasher = codec.hash_bytes,
    ) -> None:
        self.index = index
        self.hasher = hasher  # data -> its oid: sha256, or an encrypted store's keyed id
        self.append = append
        self.make_durable = make_durable
        self.sync_writes = sync_writes  # durability "power": the commit's fdatasync will wait for these bytes
        self.fetch: Fetch | None = None  # set by a store with a remote: returns verified object blobs
        self.cache = ObjectCache(CACHE_BYTES, CACHED_OBJECT_MAX)  # for checkpoint readers only (object_cache.py)
        self.held_trees = HeldTrees(HELD_TREES)  # for commits that extend a list (core/extend.py)
        self.held_lists = HeldLists(HELD_LISTS)  # for commits of a whole list that grew (core/extend.py)

    def location(self, oid: bytes) -> FrameLocation | None:
        location = self.index.object_location(oid)
        if location is None:
            self.index.refresh()
            location = self.index.object_location(oid)
        return location

    def exists(self, oid: bytes) -> bool:
        return self.location(oid) is not None

    def read_raw(self, oid: bytes) -> bytes:
        """The object's blob as stored (compressed), unverified but for its frame; fetched if missing here."""
        location = self.location(oid)
        if location is None:
            return self._fetch(oid)[0]
        return self.index.read_body(kinds.OBJECT, oid, location, lambda body: codec.decode(body, oid, f"object {oid.hex()}", self.hasher))

    def read(self, oid: bytes) -> bytes:
        location = self.location(oid)
        if location is None:
            return self._fetch(oid)[1]
        where = f"object {oid.hex()} ({self.index.where(location)})"
        try:  # the common case, in one pread: the first copy is whole and matches its hash
            return self._first_copy(oid, location, where)
        except AgentFSError:
            pass  # damaged, moved by compaction, or another record there: the reads below find a sound copy or say why not
        try:
            return self._decoded(oid, location, where)
        except AgentFSError:
            self.index.refresh()  # another process may have appended a sound copy since (a repair)
            try:
                return self._decoded(oid, location, where)
            except AgentFSError:
                pass
            # a corrupt local copy and a remote: its copy, verified, is appended and read from now on
            if self.fetch is None or (fetched := self.fetch(oid)) is None:
                raise
            log.warning("object %s is corrupt in %s: repaired from the remote", oid.hex(), where)
            return self.install(oid, fetched, f"remote object {oid.hex()}")

    def _first_copy(self, oid: bytes, location: FrameLocation, where: str) -> bytes:
        """The object's verified bytes from the copy at `location`, or an error if that copy is not sound.

        The frame's crc32 is not computed: the sha256 check covers every byte it would (the frame's length
        is the index's, its kind and key are compared here, its body is decompressed and hashed)."""
        if location.length > OBJECT_FRAME_MAX:  # checked before the read allocates it; the segment's end: index.read
            raise IntegrityError(f"{where}: the index places a record of {location.length} bytes there, over the largest object's")
        return self._verified(oid, self.index.pread(location.segment_id, location.length, location.offset), location, where)

    def _verified(self, oid: bytes, data: bytes, location: FrameLocation, where: str) -> bytes:
        """The object's verified bytes from `data`, the frame read at `location` (_first_copy)."""
        if self.index.sealer is not None and data[FRAME.size - 1 : FRAME.size] == GROUP_KIND:  # one of a group's records
            return codec.decode(self.index.read(location, kinds.OBJECT, oid).body, oid, where, self.hasher)
        body = record_body_unchecked(data, kinds.OBJECT, oid, where)
        if self.index.sealer is not None:  # authenticated before it is decompressed
            body = memoryview(self.index.sealer.open(kinds.OBJECT, oid, body, where))
        return codec.decode(body, oid, where, self.hasher)

    def read_first_copies(self, oids: Sequence[bytes]) -> list[bytes | None]:
        """Each object's verified bytes from its first copy here, or None where that is not sound, not here, or too
        large to read unchecked: the caller reads those through read(), which finds another copy, repairs from the
        remote or says what is wrong. Verified as read() verifies (_verified); one descriptor use per segment and
        no error messages made: a value's hundred small chunks cost their reads, decompressions and hashes."""
        found: list[bytes | None] = [None] * len(oids)
        wanted: dict[int, list[tuple[int, bytes, FrameLocation]]] = {}  # segment id -> (position, oid, location)
        for position, (oid, location) in enumerate(zip(oids, self.index.objects_located(list(oids)), strict=True)):
            if location is not None and location.length <= OBJECT_FRAME_MAX:
                wanted.setdefault(location.segment_id, []).append((position, oid, location))
        for segment_id, objects in wanted.items():
            try:
                frames = self.index.use(segment_id, "reading segment", _pread_each, [location for _position, _oid, location in objects])
            except AgentFSError:
                continue  # gone (compacted) or failing: read() says which
            for (position, oid, location), data in zip(objects, frames, strict=True):
                try:  # not contextlib.suppress: a context manager per object costs more than the rest of the loop
                    found[position] = self._verified(oid, data, location, UNNAMED)
                except AgentFSError:
                    continue  # left None: read() reads it again and words the error
        return found

    def _decoded(self, oid: bytes, location: FrameLocation, where: str) -> bytes:
        blob = self.index.read_body(kinds.OBJECT, oid, location, lambda body: codec.decode(body, oid, where, self.hasher))
        return codec.decode(blob, oid, where, self.hasher)

    def _fetch(self, oid: bytes) -> tuple[bytes, bytes]:
        """(blob, its bytes) fetched from the remote, verified and stored."""
        blob = self.fetch(oid) if self.fetch is not None else None
        if blob is None:
            raise ObjectMissing(f"object {oid.hex()} is missing from {self.index.directory.parent}")
        return blob, self.install(oid, blob, f"remote object {oid.hex()}")

    def install(self, oid: bytes, blob: bytes, where: str) -> bytes:
        """Verify a blob from elsewhere (a remote), append it durably, and return its bytes."""
        data = codec.decode(blob, oid, where, self.hasher)
        self.append([Record(kinds.OBJECT, oid, blob)], True)
        return data

    def start_writeback(self, locations: Sequence[FrameLocation]) -> None:
        """Start writing one appended, not yet synced, batch to disk (fsutil.start_writeback).

        Not with durability "process": nothing will wait for these bytes, and writing them at once would
        only compete with the disk's other work (a 1 GB fill then slowed the next durable commits 2x)."""
        if self.sync_writes:
            self.index.use(locations[0].segment_id, "writing back segment", start_writeback, *self._span(locations))

    def drop_cached(self, locations: Sequence[FrameLocation]) -> None:
        """Let the kernel drop from its page cache one batch start_writeback sent to disk a while before
        (fsutil.drop_cached): what is not on disk yet stays. Not with durability "process" (nothing was sent)."""
        if self.sync_writes:
            self.index.use(locations[0].segment_id, "dropping cached pages of segment", drop_cached, *self._span(locations))

    def _span(self, locations: Sequence[FrameLocation]) -> tuple[int, int]:
        """(offset, length) of the bytes of a batch's records, one segment's."""
        first, last = locations[0], locations[-1]
        return first.offset, last.offset + last.length - first.offset

    def read_node(self, oid: bytes, where: str) -> Children:
        """A tree node's children; a corrupt node is an IntegrityError from read, not a malformed one."""
        return parse_node(self.read(oid), oid, where)

    def read_nodes(self, nodes: list[Reached]) -> list[Children | AgentFSError]:
        """For the closure walk (format.walk.reach): each node's children, or what stopped reading it."""
        out: list[Children | AgentFSError] = []
        for node in nodes:
            try:
                out.append(self.read_node(node.oid, f"{node.where}: tree node {node.oid.hex()}"))
            except AgentFSError as exc:
                out.append(exc)
        return out

    def oids(self) -> list[bytes]:
        self.index.refresh()
        return self.index.object_ids()

    def sizes(self) -> list[int]:
        """The bytes of each object's blob here, object by object."""
        self.index.refresh()
        return self.index.object_lengths()


def _pread_each(fd: int, locations: list[FrameLocation]) -> list[bytes]:
    return [os.pread(fd, location.length, location.offset) for location in locations]


class _PoolLimits(NamedTuple):
    """The bounds on one ObjectWriter's pool jobs: `slots`, held at once (memory); `running`, at once on the cores (a
    stream's jobs keep every pool thread busy, and more than the cores only take turns, each switch costing cache and
    interpreter-lock handoffs: 2 at once on 2 cores, commit CPU 1.13-1.25 s against 1.15-1.34 s with the pool's 4)."""

    slots: threading.BoundedSemaphore
    running: threading.BoundedSemaphore


class ObjectWriter:
    """Gathers the new objects of one commit; `finish()` returns the records its entry's batch must carry.

    Past FLUSH_BYTES of gathered records (a large artifact), they are appended without a sync so memory
    stays bounded: the entry's batch, later in the same writer's file, is fdatasynced and covers them.
    An object the store already holds is reused only once durable (ObjectStore.make_durable).
    Several threads may each commit through their own ObjectWriter on the one pool at once.
    """

    # jobs handed to the pool and not yet done: enough that the pool never waits for the committing thread
    # to cut the next (32 chunks of a value, 176 KB on average with chunking.LARGE; a stream's jobs are
    # bounded by its blocks first, objects/blobs.py)
    MAX_IN_FLIGHT = 32
    FLUSH_BYTES = 4 << 20
    # gathered bytes past which a pool thread waits for the append under way instead of going on
    # compressing: an append that rolls the segment over fsyncs the old one (tens of ms). Peak RSS
    # follows it closely, glibc's per-thread arenas keeping what was freed (tests/objects/test_large_artifact_memory.py's
    # 1 GiB artifact: 135 MB over the baseline at 12 MiB, 230 MB at 24 MiB, before a stream was read into
    # 4 reused blocks and jobs were limited to the cores; 17 MB over it now; its limit is 200 MB)
    MAX_GATHERED = 12 << 20
    # batches sent to disk whose pages stay cached until this many more are appended, then are dropped
    # (_flush). Why: a large artifact otherwise leaves all its records in the page cache, each write
    # into pages the kernel took fresh; on these VMs a page the guest has not touched lately costs a
    # hypervisor fault: writing 180 MB in 4 MiB batches took 0.27-0.40 s of CPU, 0.04-0.17 s when each
    # batch's pages were dropped 2 batches later and reused. The artifact is then read back from disk.
    CACHED_BATCHES = 2

    def __init__(self, objects: ObjectStore, pool: ThreadPoolExecutor) -> None:
        self.objects = objects
        self.pool = pool
        self.seen: set[bytes] = set()
        self.futures: list[Future[Any]] = []
        # made at the first job for the pool (a chunk over WORK_HERE, a stream): a commit of a value's small chunks
        # makes none, and two semaphores cost it 12 us (a growing conversation's commit: some 0.4 ms of CPU)
        self._limits: _PoolLimits | None = None
        self._lock = threading.Lock()
        self._flushing = threading.Lock()
        self._gathered: list[Record] = []
        self._gathered_bytes = 0
        self._sent: deque[list[FrameLocation]] = deque()  # batches sent to disk, oldest first, under _flushing

    @property
    def limits(self) -> _PoolLimits:
        """The bounds on this writer's pool jobs, made at the first use."""
        with self._lock:
            if self._limits is None:
                self._limits = _PoolLimits(threading.BoundedSemaphore(self.MAX_IN_FLIGHT), threading.BoundedSemaphore(CORES))
            return self._limits

    def _is_new(self, oid: bytes) -> bool:
        with self._lock:
            if oid in self.seen:
                return False
            self.seen.add(oid)
        location = self.objects.index.object_location(oid)  # not refreshed: a copy missed is only a duplicate
        if location is None:
            return True
        self.objects.make_durable(location)
        return False

    def reuse(self, oid: bytes) -> bool:
        """Whether the store holds `oid` (made durable, as add() does for one it holds) or this writer stores it:
        then a blob may refer to it without its bytes. False leaves `oid` free to be added."""
        with self._lock:
            if oid in self.seen:
                return True
        location = self.objects.index.object_location(oid)
        if location is None:
            return False
        self.objects.make_durable(location)
        with self._lock:
            self.seen.add(oid)
        return True

    def add(self, data: bytes | memoryview) -> bytes:
        """Store `data` unless the store already holds it; returns its id."""
        oid = self.objects.hasher(data)
        if self._is_new(oid):
            if len(data) <= WORK_HERE:
                self._gather(oid, bytes(data))
            else:
                self._submit(self._write, oid, bytes(data))
        return oid

    def keep(self, oid: bytes, data: bytes | memoryview) -> None:
        """Keep an object this commit stores (its id computed here from `data`) for the store's readers, as if read."""
        self.objects.cache.keep(oid, data)

    def add_later(self, data: bytes | memoryview) -> bytes | Future[bytes]:
        """Like add(); a large chunk's hashing is done on the pool too (its id is then a future): the
        caller only cuts. `data` is handed to the pool uncopied: it must not change until finish()."""
        if len(data) <= WORK_HERE:
            return self.add(data)
        return self._submit(self._hash_and_write, data)

    def add_all_later(self, chunks: list[memoryview], done: Callable[[], None]) -> Future[list[bytes]]:
        """Store each chunk unless the store holds it, in one job on the pool: their ids, in order. The
        chunks are handed over uncopied: they must not change until `done` is called, once all are stored."""
        return self._submit(self._store_all, chunks, done)

    def _submit(self, job: Callable[..., Any], *args: Any) -> Future[Any]:
        self.limits.slots.acquire()  # bounds memory: at most MAX_IN_FLIGHT jobs are held at once
        try:
            future = self.pool.submit(job, *args)
        except BaseException:
            self.limits.slots.release()
            raise
        self.futures.append(future)
        return future

    def _hash_and_write(self, data: bytes | memoryview) -> bytes:
        try:
            return self._store(data)
        finally:
            self.limits.slots.release()

    def _store_all(self, chunks: list[memoryview], done: Callable[[], None]) -> list[bytes]:
        """Hash and compress `chunks` holding a place on the cores (limits.running), then append what is gathered
        without it: an append that rolls the segment over waits for its fsyncs (3 of 10-40 ms in a 256 MiB
        artifact), and another job compresses meanwhile (tests/objects/test_artifact_pipeline.py)."""
        try:
            with self.limits.running:
                oids = [self._store(chunk, flush=False) for chunk in chunks]
        finally:
            self.limits.slots.release()
            done()
        self._flush()
        return oids

    def _store(self, data: bytes | memoryview, *, flush: bool = True) -> bytes:
        oid = self.objects.hasher(data)
        if self._is_new(oid):
            self._gather(oid, data, flush=flush)
        return oid

    def _write(self, oid: bytes, data: bytes) -> None:
        try:
            self._gather(oid, data)
        finally:
            self.limits.slots.release()

    def _gather(self, oid: bytes, data: bytes | memoryview, *, flush: bool = True) -> None:
        """Add `data`'s record to what is gathered; `flush`: and append what is gathered if it is enough (_flush)."""
        record = Record(kinds.OBJECT, oid, codec.encode(data))
        with self._lock:
            self._gathered.append(record)
            self._gathered_bytes += len(record.body)
            if not flush or self._gathered_bytes < self.FLUSH_BYTES:
                return
        self._flush()

    def _flush(self) -> None:
        """Append what is gathered, one append at a time, each batch taken under the flush lock.

        A pool thread that finds an append under way goes back to compressing while less than
        MAX_GATHERED is gathered; past it, it waits its turn holding nothing more than its own chunk,
        so memory stays bounded (a stream's job looks once it has gathered all its chunks, _store_all: each
        of the pool's threads may add one job's objects past it). Who appends takes again what gathered meanwhile."""
        while True:
            with self._lock:
                if self._gathered_bytes < self.FLUSH_BYTES:
                    return
                must_wait = self._gathered_bytes >= self.MAX_GATHERED
            if not self._flushing.acquire(blocking=must_wait):
                return
            try:
                with self._lock:
                    if self._gathered_bytes < self.FLUSH_BYTES:
                        return  # appended by the thread before
                    batch, self._gathered, self._gathered_bytes = self._gathered, [], 0
                self._send(batch)
            finally:
                self._flushing.release()

    def _send(self, batch: list[Record]) -> None:
        """Append `batch` unsynced and start the disk writing it, under the flush lock."""
        # the disk writes it while the pool compresses on: the commit's final fdatasync and the
        # fsync of a segment sealed at a roll-over then wait for little
        self._sent.append(self.objects.append(batch, False))
        self.objects.start_writeback(self._sent[-1])
        if len(self._sent) > self.CACHED_BATCHES:
            self.objects.drop_cached(self._sent.popleft())

    def send_gathered(self) -> None:
        """Append what is gathered now, however little, and start the disk writing it (a stream's last chunks):
        the commit's fdatasync, after its tree nodes and entry are made, then has less left to wait for."""
        with self._flushing:
            with self._lock:
                batch, self._gathered, self._gathered_bytes = self._gathered, [], 0
            if batch:
                self._send(batch)

    def abandon(self) -> None:
        """After a failed commit: cancel the jobs not started and wait for the running ones, dropping what is
        gathered; once it returns, nothing of this writer is appended. The writer is not used again."""
        for future in self.futures:
            if future.cancel():
                self.limits.slots.release()
        wait(self.futures)
        self.futures.clear()
        with self._lock:
            self._gathered, self._gathered_bytes = [], 0

    def finish(self) -> list[Record]:
        """Wait for every object; the records not yet appended (the entry's batch carries them)."""
        for future in self.futures:
            future.result()
        self.futures.clear()
        with self._lock:
            gathered, self._gathered, self._gathered_bytes = self._gathered, [], 0
        return gathered
