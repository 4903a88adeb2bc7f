"""Push to a format-2 remote: the new records of a batch as packs, then the packs' indexes, then head keys.

In that order, each step waiting for the one before: a reader that sees a head key finds every pack
index it needs, and every index names a pack that is whole. Packs go up concurrently (at most
IN_FLIGHT at once, so memory stays bounded by IN_FLIGHT x PACK_TARGET); every record is verified
before it is packed, so nothing corrupt goes up.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor

from ulid import ULID

from ..engine.repository import Repository
from ..errors import AgentFSError
from ..format import keys, kinds
from ..format.entries import Entry
from ..format.keys import LOG, RETIRED
from ..format.pack import MAX_HEAD, Pack, decode_head, encode_head, encode_pack
from ..format.refs import Location
from ..format.segment import IndexEntry, Record
from .outgoing import check_entry, check_object
from .pack_remote import KIND_OF, PackRemote
from .pull import check_record
from .push import Pusher, PushStats
from .remote import Remote

BATCH = 1024
PACK_TARGET = 32 << 20  # a pack is closed once it holds this many bytes (a big artifact spans several)
IN_FLIGHT = 4
CHECK_WINDOW = 128  # objects read and verified at once before packing (bounds memory: 128 chunks, ~64 KiB to 1 MiB each)


def place_key(kind: int, key: bytes) -> str:
    return (bytes([kind]) + key).hex()


class PackPusher(Pusher):
    """A Pusher for a format-2 remote: connect, status, pending and recheck as Pusher's; push by packs."""

    remote: PackRemote
    batch_size = BATCH

    def __init__(self, store: Repository, remote: PackRemote, *, workers: int = 16, pack_target: int = PACK_TARGET) -> None:
        super().__init__(store, remote, workers=workers)
        self.pack_target = pack_target
        self.writer = ULID.from_str(store.id).bytes

    def push_object(self, oid: bytes, stats: PushStats, stop: threading.Event | None = None) -> None:
        """Upload one object again (a recheck found it lost) as a pack of its own, with its index."""
        if stop is not None and stop.is_set():
            return
        with ThreadPoolExecutor(1, thread_name_prefix="agentfs-push") as pool:
            self._place(self._put_indexes(pool, self._put_packs(pool, self._records(pool, [oid], {}, []), stats)))
        if oid not in self.refusals.objects:
            self.index.add_objects([oid])

    def _push_part(
        self,
        pool: ThreadPoolExecutor,
        batch: list[Location],
        records: list[tuple[str, str, str]],
        stats: PushStats,
        stop: threading.Event | None,
    ) -> None:
        """Push a batch of entries and the journal and retirement `records` as packs, their indexes, then head keys."""
        self.barrier.check(stop, force=True)  # the remote gc rule (remote_gc.py): before trusting the index
        entries = self._entries(batch)
        seen: set[bytes] = set()
        oids: list[bytes] = []
        for loc, (_raw, entry) in list(entries.items()):
            try:
                oids.extend(oid for oid in self._closure(loc, entry, seen) if oid not in self.index.objects)
            except AgentFSError as exc:  # a corrupt tree node: this checkpoint stays local, the rest goes up
                self.refusals.entry(loc, str(exc))
                del entries[loc]
        uploads = self._put_packs(pool, self._records(pool, oids, entries, records), stats)
        if self.barrier.check(stop):  # a remote gc finished since the look above: what the index vouched for may be gone
            sent = set(oids)
            again = [oid for loc, (_raw, entry) in entries.items() for oid in self._closure(loc, entry, set())]
            gone = sorted({oid for oid in again if oid not in self.index.objects} - sent)
            uploads += self._put_packs(pool, self._records(pool, gone, {}, []), stats)
        self._place(self._put_indexes(pool, uploads))
        retired = [(run, record_id) for kind, run, record_id in records if kind == RETIRED]
        for _ in pool.map(lambda loc: self._put_retired(*loc), retired):  # before the index says they are up
            pass
        self.index.add_objects([oid for oid in oids if oid not in self.refusals.objects])
        self.index.add_entries(list(entries))
        self.index.add_records(records)
        heads: dict[str, str] = {}
        for run, checkpoint_id in entries:
            heads[run] = max(heads.get(run, checkpoint_id), checkpoint_id)
        for _ in pool.map(lambda head: self._put_head(head[0], head[1], entries[head][1]), heads.items()):
            pass

    def _place(self, packs: list[tuple[str, list[IndexEntry]]]) -> None:
        """Note where the records of packs just pushed lie: the reader's map and the index's hints for head keys."""
        places: dict[str, str] = {}
        for pack_id, frames in packs:
            self.remote.learn(pack_id, frames)
            places.update((place_key(frame.kind, frame.key), pack_id) for frame in frames)
        self.index.add_places(places)

    def _entries(self, batch: list[Location]) -> dict[Location, tuple[bytes, Entry]]:
        """The batch's entries, checked, with any entry they borrow from that the remote is not known to hold."""
        entries: dict[Location, tuple[bytes, Entry]] = {}
        todo = list(batch)
        while todo:
            loc = todo.pop()
            if loc in entries or loc in self.refusals.entries:
                continue
            raw = self.store.local_entry(*loc)
            if raw is None:
                continue  # retired here since it was listed
            try:
                check_entry(loc, raw, f"{loc[0]}@{loc[1]} ({self.store.where_stored(loc[0], LOG, loc[1])})")
                entry = self.store.read_entry(*loc)
            except AgentFSError as exc:  # a damaged entry stays local; the rest goes up
                self.refusals.entry(loc, str(exc))
                continue
            entries[loc] = (raw, entry)
            todo.extend(dep for dep in entry.borrowed() if dep not in self.index.entries and self.store.has_entry(*dep))
        return entries

    def _records(
        self, pool: ThreadPoolExecutor, oids: list[bytes], entries: dict[Location, tuple[bytes, Entry]], records: list[tuple[str, str, str]]
    ) -> Iterator[Record]:
        """What goes up, each record verified first: objects (checked CHECK_WINDOW at a time on the pool:
        zstd and sha256 release the GIL), then entries, then journal and retirement records."""
        for start in range(0, len(oids), CHECK_WINDOW):
            for record in pool.map(self._checked_object, oids[start : start + CHECK_WINDOW]):
                if record is not None:
                    yield record
        for (run, checkpoint_id), (raw, _entry) in entries.items():
            yield Record(kinds.ENTRY, kinds.pair_key(run, checkpoint_id), raw)
        for kind, run, record_id in records:
            body = self.store.read_record(run, kind, record_id)
            if body is None:
                continue  # removed by retention since it was listed
            try:
                check_record(kind, body, run, record_id, f"{run} {kind}/{record_id} ({self.store.where_stored(run, kind, record_id)})")
            except AgentFSError as exc:
                self.refusals.record(f"{kind} record not pushed: {exc}")
                continue
            yield Record(KIND_OF[kind], kinds.pair_key(run, record_id), body)

    def _checked_object(self, oid: bytes) -> Record | None:
        data = self.store.db.read_raw(oid)
        try:
            check_object(oid, data, f"local object {oid.hex()} in {self.store.root}")
        except AgentFSError as exc:
            self.refusals.object(oid, f"object not pushed: {exc}")
            return None
        return Record(kinds.OBJECT, oid, data)

    def _put_packs(self, pool: ThreadPoolExecutor, records: Iterator[Record], stats: PushStats) -> list[Pack]:
        """Put the records up as packs, each built and put on the pool (framing and checksums use both
        cores); every one whole when this returns."""
        slots = threading.BoundedSemaphore(IN_FLIGHT)
        uploads: list[Future[Pack]] = []
        chunk: list[Record] = []
        size = 0

        def close() -> None:
            slots.acquire()  # bounded memory: at most IN_FLIGHT packs gathered and not yet up
            future = pool.submit(self._put_pack, chunk, stats)
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
        return [future.result() for future in uploads]  # every pack whole before any index names it

    def _put_pack(self, records: list[Record], stats: PushStats) -> Pack:
        pack = encode_pack(records, self.writer)
        self.remote.create(self.remote.key(*keys.pack_key(pack.pack_id)), pack.data)
        with self._stats_lock:
            stats.bytes += len(pack.data)
        return pack._replace(data=b"")  # what the index needs; the bytes are up

    def _put_indexes(self, pool: ThreadPoolExecutor, packs: list[Pack]) -> list[tuple[str, list[IndexEntry]]]:
        """Put up the indexes of packs that are up; (pack id, its records' places) of each."""
        indexes = [(self.remote.key(*keys.pack_index_key(pack.pack_id)), pack.footer) for pack in packs]
        for _ in pool.map(lambda key_data: self.remote.create(*key_data), indexes):
            pass
        return [(pack.pack_id, pack.entries) for pack in packs]

    def _count(self, kind: int, stats: PushStats) -> None:
        if kind == kinds.OBJECT:
            stats.objects += 1
        elif kind == kinds.ENTRY:
            stats.entries += 1
        else:
            stats.records += 1

    def _put_retired(self, run: str, record_id: str) -> None:
        """A retirement record under its own key too (FORMAT.md): readers list them without the pack indexes."""
        data = self.store.read_record(run, RETIRED, record_id)
        try:
            check_record(RETIRED, data or b"", run, record_id, self.store.where_stored(run, RETIRED, record_id))
        except AgentFSError:
            return  # refused (and reported) as its pack was made, or removed since
        self.remote.create(self.remote.key(*keys.retired_key(run, record_id)), data or b"")

    def _put_head(self, run: str, checkpoint_id: str, entry: Entry) -> None:
        """The head key, last: it names the packs holding the entry and its closure, where this index knows them."""
        needed = [place_key(kinds.ENTRY, kinds.pair_key(run, checkpoint_id))]
        needed += [place_key(kinds.ENTRY, kinds.pair_key(*dep)) for dep in entry.borrowed()]
        needed += [place_key(kinds.OBJECT, oid) for oid in self._closure((run, checkpoint_id), entry, set())]
        packs = {self.index.places[key] for key in needed if key in self.index.places}
        key = self.remote.key(*keys.head_key(run, checkpoint_id))
        if not self.remote.create(key, encode_head(run, checkpoint_id, sorted(packs)), compare=False):
            held = self.remote.read(key, MAX_HEAD)  # pushed before (a recheck): any valid head key for it will do
            decode_head(held or b"", run, checkpoint_id, f"remote {self.remote.url} head key {run}@{checkpoint_id}")


def pusher_for(store: Repository, remote: Remote, *, workers: int = 16) -> Pusher:
    """The pusher for the remote's format: packs for a format-2 remote, format 1's keys otherwise."""
    return PackPusher(store, remote, workers=workers) if isinstance(remote, PackRemote) else Pusher(store, remote, workers=workers)
