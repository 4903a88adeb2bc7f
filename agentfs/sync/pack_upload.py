"""Putting a push's records up as packs, and their indexes (push.py decides what goes up and in what order).

Packs go up on IN_FLIGHT threads of their own while the next is gathered, at most IN_FLIGHT at once (memory stays
bounded by about 2 x (IN_FLIGHT + 1) x PACK_TARGET, tests/sync/test_sync_memory.py); a pack of objects only is
indexed as soon as it is up, and the push index notes its objects then, so a push cut short resumes without
uploading them again (tests/sync/test_push_resume.py).
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor

from tqdm import tqdm

from ..engine.repository import Repository
from ..format import kinds
from ..format.pack import Pack, encode_pack
from ..format.segment import IndexEntry, Record
from .index import PushIndex
from .pack_remote import PackRemote

# a pack is closed once it holds this many bytes (a big artifact spans several); a push cut short sends again at most
# the IN_FLIGHT packs not yet indexed (8 MiB). Larger packs or more in flight: more bytes lost to a kill
# (tests/sync/test_push_resume.py bounds them at 1.3x a clean push); smaller: more requests to resume an artifact
PACK_TARGET = 8 << 20
IN_FLIGHT = 1


def place_key(kind: int, key: bytes) -> str:
    """A record's name in the push index's places (its key as stored: an encrypted store's names no run)."""
    return (bytes([kind]) + key).hex()


@dataclasses.dataclass
class UploadCounts:
    """What went up: records by kind, and the packs' bytes."""

    entries: int = 0
    objects: int = 0
    records: int = 0  # journal and retirement records
    bytes: int = 0


class PackUploader:
    """Puts records up as packs on `remote` for `store` (written by `writer`), noting what went up in `index`."""

    def __init__(self, store: Repository, remote: PackRemote, index: PushIndex, writer: bytes, pack_target: int = PACK_TARGET) -> None:
        self.store, self.remote, self.index, self.writer, self.pack_target = store, remote, index, writer, pack_target
        self.bar: tqdm[None] | None = None  # the running push's byte progress
        self._stats_lock = threading.Lock()

    def put_packs(self, records: Iterator[Record], stats: UploadCounts) -> list[Pack]:
        """Put the records up as packs, each built and put on a thread of its own while the next is gathered;
        every one whole when this returns."""
        # Hazard: packs built on all of `pool`'s threads left a pack-sized buffer in each thread's malloc arena
        # (glibc keeps freed large blocks once its mmap threshold has grown): a 256 MiB push peaked at 179 MB RSS.
        # Built on IN_FLIGHT threads of their own, it stays bounded (tests/sync/test_sync_memory.py).
        # A pack of objects is indexed on a thread of its own while the next pack goes up: a kill between its
        # bytes and its index leaves it whole, and the next push adopts it (leftovers.adopt_young) rather than send it
        # again, so the bytes a kill wastes stay those of the one pack in flight (tests/sync/test_push_overlap.py).
        with (
            ThreadPoolExecutor(IN_FLIGHT, thread_name_prefix="agentfs-pack") as packer,
            ThreadPoolExecutor(1, thread_name_prefix="agentfs-pack-index") as indexer,
        ):
            return self._put_packs_on(packer, indexer, records, stats)

    def _put_packs_on(
        self, pool: ThreadPoolExecutor, indexer: ThreadPoolExecutor, records: Iterator[Record], stats: UploadCounts
    ) -> list[Pack]:
        slots = threading.BoundedSemaphore(IN_FLIGHT)
        uploads: list[Future[Pack]] = []
        indexed: list[Future[None]] = []
        chunk: list[Record] = []
        size = 0

        def close() -> None:
            slots.acquire()  # bounded memory: at most IN_FLIGHT packs gathered and not yet up
            future = pool.submit(self._put_pack, chunk, stats, lambda pack: indexed.append(indexer.submit(self._index_objects, pack)))
            future.add_done_callback(lambda _done: slots.release())
            uploads.append(future)

        for record in records:
            chunk.append(record)
            size += len(record.body)
            self._count(record.kind, stats)
            if size >= self.pack_target:
                close()
                chunk, size = [], 0
        if chunk:
            close()
        packs = [future.result() for future in uploads]  # every pack whole before any index names it
        for done in indexed:  # and each pack of objects indexed before a pack of entries is
            done.result()
        return packs

    def _put_pack(self, records: list[Record], stats: UploadCounts, index_objects: Callable[[Pack], object]) -> Pack:
        """Put one pack up; one of objects only gets its index at once and its objects are noted as pushed, so
        a push cut short later does not upload them again. A pack holding entries is indexed by put_indexes."""
        pack = encode_pack(self.store.sealed(records), self.writer)  # an encrypted store's packs hold what its segments do
        records.clear()  # the pack holds the bytes now: memory bound
        self.remote.put_pack(pack.pack_id, pack.data)
        with self._stats_lock:
            stats.bytes += len(pack.data)
        if self.bar is not None:
            self.bar.update(len(pack.data))
        pack = pack._replace(data=b"")  # what the index needs; the bytes are up
        if all(frame.kind == kinds.OBJECT for frame in pack.entries):
            index_objects(pack)
            return pack._replace(footer=b"")  # indexed: put_indexes skips it
        return pack

    def _index_objects(self, pack: Pack) -> None:
        self._put_index(pack)
        self.place([(pack.pack_id, pack.entries)])
        self.index.add_objects([frame.key for frame in pack.entries])

    def _put_index(self, pack: Pack) -> None:
        self.remote.put_pack_index(pack.pack_id, pack.footer)
        self.remote.catalogue.keep_index(pack.pack_id, pack.footer)  # never fetched back by this store's confirmations

    def put_indexes(self, pool: ThreadPoolExecutor, packs: list[Pack]) -> list[tuple[str, list[IndexEntry]]]:
        """Put up the indexes of packs that are up; (pack id, its records' places) of each."""
        # Hazard: a reader of every index (pull) that saw an entry's index before the index of the pack holding
        # its objects, or an entry it borrows from, would find it lacking them. Indexes of packs with no entry go
        # up first, together; then those with entries, one at a time in pack order (push.py's _records puts objects first
        # and every entry after those it borrows from).
        # (packs of objects only were indexed as they went up, _put_pack: their footer is dropped)
        unindexed = [pack for pack in packs if pack.footer]
        holds_entries = [any(frame.kind == kinds.ENTRY for frame in pack.entries) for pack in unindexed]
        for _ in pool.map(self._put_index, [pack for pack, entries in zip(unindexed, holds_entries, strict=True) if not entries]):
            pass
        for pack in [pack for pack, entries in zip(unindexed, holds_entries, strict=True) if entries]:
            self._put_index(pack)
        return [(pack.pack_id, pack.entries) for pack in packs]

    def _count(self, kind: int, stats: UploadCounts) -> None:
        if kind == kinds.OBJECT:
            stats.objects += 1
        elif kind == kinds.ENTRY:
            stats.entries += 1
        else:
            stats.records += 1

    def place(self, packs: list[tuple[str, list[IndexEntry]]]) -> None:
        """Note where the records of packs just pushed lie: the reader's map and the index's hints for head keys."""
        places: dict[str, str] = {}
        for pack_id, stored in packs:
            frames = self.remote.catalogue.learn(pack_id, stored)
            places.update((self.place_key(frame.kind, frame.key), pack_id) for frame in frames)
        self.index.add_places(places)

    def place_key(self, kind: int, key: bytes) -> str:
        """A record's name in the index's places: by its stored key in an encrypted store (no run name in the file)."""
        return place_key(kind, key if self.store.sealer is None else self.store.sealer.stored_key(kind, key))
