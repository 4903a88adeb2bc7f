"""Push to a remote: the new records of a batch as packs, then the packs' indexes, then head keys.

In that order, each step waiting for the one before: a reader that sees a head key finds every pack
index it needs, and every index names a pack that is whole. A pack of objects only gets its index as
soon as it is up, and the push index notes its objects then, so a push cut short at any point resumes
without uploading them again (tests/sync/test_push_resume.py). Packs go up concurrently (at most IN_FLIGHT
at once: memory stays bounded by about 2 x (IN_FLIGHT + 1) x PACK_TARGET, tests/sync/test_sync_memory.py);
every record is verified before it is packed, so nothing corrupt goes up. What the remote holds, by
its pack indexes, is skipped: the push index is confirmed against them before a head is published.
"""

from __future__ import annotations

import dataclasses
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor

from tqdm import tqdm
from ulid import ULID

from ..engine.keyslots import read_slots
from ..engine.lineage import diverged
from ..engine.repository import Repository
from ..errors import AgentFSError
from ..format import kinds
from ..format.config import remote_config
from ..format.entries import Entry
from ..format.keys import JOURNAL_RECORDS, LOG_RECORDS, RETIRED_RECORDS
from ..format.pack import Pack, decode_head, encode_head, encode_pack
from ..format.refs import EntryAddress
from ..format.segment import IndexEntry, Record
from ..format.walk import reach
from ..ids import id_time_ns
from .index import PushIndex, remember_url
from .outgoing import Holdings, Refusals, borrowed_first, check_entry, check_object
from .pack_remote import PackRemote
from .pull import check_record
from .remote_gc import GcBarrier

BATCH = 1024
# a pack is closed once it holds this many bytes (a big artifact spans several); a push cut short sends again at most
# the IN_FLIGHT packs not yet indexed (8 MiB). Larger packs or more in flight: more bytes lost to a kill
# (tests/sync/test_push_resume.py bounds them at 1.3x a clean push); smaller: more requests to resume an artifact
PACK_TARGET = 8 << 20
IN_FLIGHT = 1
CHECK_WINDOW = 16  # objects read and verified at once before packing (bounds memory: 16 chunks, ~64 KiB to 1 MiB each)


@dataclasses.dataclass
class PushStats:
    entries: int = 0
    objects: int = 0
    records: int = 0  # journal and retirement records
    bytes: int = 0
    seconds: float = 0.0
    refused: list[str] = dataclasses.field(default_factory=list)  # corrupt local records, not pushed: why, each
    held_back: list[EntryAddress] = dataclasses.field(default_factory=list)  # checkpoints not pushed: they need a refused record
    lost_objects: int = 0  # the push index said the remote held them, its pack indexes did not: uploaded again
    lost_entries: int = 0
    diverged: dict[str, list[str]] = dataclasses.field(default_factory=dict)  # run -> its heads, for pushed runs with several


def lag_seconds(pending: list[EntryAddress]) -> float:
    """Age of the oldest checkpoint the remote lacks (its id holds its time); 0 when none."""
    oldest = min((id_time_ns(cid) for _run, cid in pending), default=None)
    return 0.0 if oldest is None else max(0.0, time.time() - oldest / 1e9)


def local_records(store: Repository) -> list[tuple[str, str, str]]:
    """(kind, run, id) of every journal and retirement record in the store."""
    return [(kind, *loc) for kind in (JOURNAL_RECORDS, RETIRED_RECORDS) for loc in store.local_records(kind)]


def place_key(kind: int, key: bytes) -> str:
    return (bytes([kind]) + key).hex()


class Pusher:
    batch_size = BATCH

    def __init__(self, store: Repository, remote: PackRemote, *, workers: int = 16, pack_target: int = PACK_TARGET) -> None:
        self.store = store
        self.remote = remote
        self.workers = workers
        self.pack_target = pack_target
        self.writer = ULID.from_str(store.id).bytes
        remote.sealer = store.sealer  # checked against the remote's config by _ensure_config
        # one index per remote and process: what a resume fetched counts as already there
        self.index = remote.index or PushIndex(store.remote_state_dir(remote.transport.name), store.sealer)
        remote.index = self.index
        remote.keep_indexes(store)
        remember_url(self.index.directory, remote.url)
        self._config_checked = False
        self._listed = False  # packs/ listed by a batch of this pusher (Holdings): later batches list only to confirm a claim
        self.barrier = GcBarrier(remote, self.index)
        self.last_scan: list[EntryAddress] = []  # what the last push found pending: status without a rescan
        self._stats_lock = threading.Lock()
        self.refusals = Refusals()
        self._bar: tqdm[None] | None = None  # the running push's byte progress

    def pending(self) -> list[EntryAddress]:
        """Local checkpoints the remote is not known to hold, oldest first."""
        known = self.index.entries
        return sorted((loc for loc in self.store.local_entries() if loc not in known), key=lambda loc: (loc[1], loc[0]))

    def pending_records(self) -> list[tuple[str, str, str]]:
        """Journal and retirement records the remote is not known to hold."""
        return [record for record in local_records(self.store) if record not in self.index.records]

    def push(self, *, progress: bool = False, stop: threading.Event | None = None) -> PushStats:
        started = time.monotonic()
        stats = PushStats()
        self.refusals = Refusals()
        pending = self.pending()
        self.last_scan = pending
        records = self.pending_records()
        if not pending and not records:
            return stats
        self._ensure_config()
        title = f"push {self.remote.url}"
        bar = tqdm(total=0, unit="B", unit_scale=True, desc=title, disable=not (progress and sys.stderr.isatty()))
        self._bar = bar
        self.barrier.notice = lambda waiting: bar.set_description_str(f"{title}: {waiting}" if waiting else title)
        with bar, ThreadPoolExecutor(self.workers, thread_name_prefix="agentfs-push") as pool:
            for start in range(0, max(len(pending), 1), self.batch_size):
                if stop is not None and stop.is_set():
                    break
                batch = pending[start : start + self.batch_size]
                self._push_part(pool, batch, records if start == 0 else [], stats, stop)
        self._bar = None
        self.barrier.notice = lambda _waiting: None
        # a run whose records alone were pushed is checked too: a retirement may have ended its divergence
        pushed = {run for run, _id in pending} | {run for _kind, run, _id in records}
        stats.diverged = diverged(self.store, pushed)
        self.index.note_divergence(pushed, stats.diverged)
        stats.seconds = time.monotonic() - started
        stats.refused = self.refusals.reasons
        stats.held_back = sorted(self.refusals.entries)
        if stats.lost_objects or stats.lost_entries:
            self.index.note_lost(stats.lost_objects, stats.lost_entries)
        return stats

    def record_status(self, *, pushed: bool, error: str | None) -> None:
        """Publish a one-shot push's outcome where `agentfs status` reads it (the daemon publishes its own)."""
        pending = [loc for loc in self.last_scan if loc not in self.index.entries]
        previous = self.index.read_status().get("last_push")
        self.index.write_status(
            {
                "url": self.remote.url,
                "last_push": time.time() if pushed else previous,
                "last_error": error,
                "lag_checkpoints": len(pending),
                "lag_seconds": lag_seconds(pending),
                "running": False,
                "updated": time.time(),
            }
        )

    def connect(self) -> None:
        """Reach the remote once: checks (or writes) its config."""
        self._ensure_config()

    def reconnect(self) -> None:
        """Check (or write again) the remote's config on the next push: a recheck found it gone."""
        self._config_checked = False
        self.remote.config = None
        self._ensure_config()

    def _ensure_config(self) -> None:
        if self._config_checked:
            return
        self.remote.ensure_config(remote_config(self.store.config))
        self.remote.use_keys(self.store.sealer)
        if self.store.sealer is not None:  # a machine resuming from the remote unlocks it with these
            for slot in read_slots(self.store.root):
                self.remote.put_slot(slot)
        self._config_checked = True

    def push_object(self, oid: bytes, stats: PushStats, stop: threading.Event | None = None) -> None:
        """Upload one object again (a recheck found it lost) as a pack of its own, with its index."""
        if stop is not None and stop.is_set():
            return
        with ThreadPoolExecutor(1, thread_name_prefix="agentfs-push") as pool:
            self._place(self._put_indexes(pool, self._put_packs(self._records(pool, [oid], {}, []), stats)))
        if oid not in self.refusals.objects:
            self.index.add_objects([oid])

    def _push_part(
        self,
        pool: ThreadPoolExecutor,
        batch: list[EntryAddress],
        records: list[tuple[str, str, str]],
        stats: PushStats,
        stop: threading.Event | None,
    ) -> None:
        """Push a batch of entries and the journal and retirement `records` as packs, their indexes, then head keys."""
        self.barrier.check(stop, force=True)  # the remote gc rule (remote_gc.py): before trusting the index
        held = Holdings(self.remote, self.index, listed=self._listed)  # the push index confirmed against the remote's pack indexes
        self._listed = True
        entries = self._entries(batch, held)
        seen: set[bytes] = set()
        oids: list[bytes] = []
        for loc, (_raw, entry) in list(entries.items()):
            try:
                oids.extend(oid for oid in self._closure(loc, entry, seen) if not held.object(oid))
            except AgentFSError as exc:  # a corrupt tree node: this checkpoint stays local, the rest goes up
                self.refusals.entry(loc, str(exc))
                del entries[loc]
        held.settle()
        stats.lost_objects += len(held.lost_objects)
        stats.lost_entries += len(held.lost_entries)
        if self._bar is not None:
            self._bar.total = (self._bar.total or 0) + self._sizes(oids) + sum(len(raw) for raw, _entry in entries.values())
            self._bar.refresh()
        uploads = self._put_packs(self._records(pool, oids, entries, records), stats)
        if self.barrier.check(stop):  # a remote gc finished since the look above: what the index vouched for may be gone
            sent = set(oids)
            again = [oid for loc, (_raw, entry) in entries.items() for oid in self._closure(loc, entry, set())]
            gone = sorted({oid for oid in again if oid not in self.index.objects} - sent)
            uploads += self._put_packs(self._records(pool, gone, {}, []), stats)
        self._place(self._put_indexes(pool, uploads))
        retired = [(run, record_id) for kind, run, record_id in records if kind == RETIRED_RECORDS]
        for _ in pool.map(lambda loc: self._put_retired(*loc), retired):  # before the index says they are up
            pass
        self.index.add_objects([oid for oid in oids if oid not in self.refusals.objects])
        pushed = [loc for loc in entries if loc not in self.refusals.entries]
        heads: dict[str, str] = {}
        for run, checkpoint_id in pushed:
            heads[run] = max(heads.get(run, checkpoint_id), checkpoint_id)
        for _ in pool.map(lambda head: self._put_head(head[0], head[1], entries[head][1]), heads.items()):
            pass
        # only now are the entries pushed: a head put that failed leaves them unmarked, so the next push puts it again
        self.index.add_entries(pushed)
        self.index.add_records(records)

    def _place(self, packs: list[tuple[str, list[IndexEntry]]]) -> None:
        """Note where the records of packs just pushed lie: the reader's map and the index's hints for head keys."""
        places: dict[str, str] = {}
        for pack_id, stored in packs:
            frames = self.remote.catalogue.learn(pack_id, stored)
            places.update((self._place_key(frame.kind, frame.key), pack_id) for frame in frames)
        self.index.add_places(places)

    def _sizes(self, oids: list[bytes]) -> int:
        """About how many bytes `oids` are here (their frames): the progress bar's total."""
        frames = {location for oid in oids if (location := self.store.db.location(oid)) is not None}  # a group's frame once
        return sum(location.length for location in frames)

    def _entries(self, batch: list[EntryAddress], held: Holdings) -> dict[EntryAddress, tuple[bytes, Entry]]:
        """The batch's entries, checked, with any entry they borrow from that the remote does not hold."""
        entries: dict[EntryAddress, tuple[bytes, Entry]] = {}
        todo = list(batch)
        while todo:
            loc = todo.pop()
            if loc in entries or loc in self.refusals.entries:
                continue
            raw = self.store.local_entry(*loc)
            if raw is None:
                continue  # retired here since it was listed
            try:
                check_entry(loc, raw, f"{loc[0]}@{loc[1]} ({self.store.where_stored(loc[0], LOG_RECORDS, loc[1])})", self.store.hasher)
                entry = self.store.read_entry(*loc)
            except AgentFSError as exc:  # a damaged entry stays local; the rest goes up
                self.refusals.entry(loc, str(exc))
                continue
            entries[loc] = (raw, entry)
            todo.extend(dep for dep in entry.borrowed() if not held.entry(dep) and self.store.has_entry(*dep))
        return entries

    def _records(
        self,
        pool: ThreadPoolExecutor,
        oids: list[bytes],
        entries: dict[EntryAddress, tuple[bytes, Entry]],
        records: list[tuple[str, str, str]],
    ) -> Iterator[Record]:
        """What goes up, each record verified first: objects (checked CHECK_WINDOW at a time on the pool:
        zstd and sha256 release the GIL), then entries, then journal and retirement records."""
        for start in range(0, len(oids), CHECK_WINDOW):
            for record in pool.map(self._checked_object, oids[start : start + CHECK_WINDOW]):
                if record is not None:
                    yield record
        self._refuse_dependents(entries)  # every object is checked by now
        for run, checkpoint_id in borrowed_first(entries):
            if (run, checkpoint_id) not in self.refusals.entries:
                yield Record(kinds.ENTRY, kinds.pair_key(run, checkpoint_id), entries[run, checkpoint_id][0])
        for kind, run, record_id in records:
            body = self.store.read_record(run, kind, record_id)
            if body is None:
                continue  # removed by retention since it was listed
            try:
                check_record(kind, body, run, record_id, f"{run} {kind}/{record_id} ({self.store.where_stored(run, kind, record_id)})")
            except AgentFSError as exc:
                self.refusals.record(f"{kind} record not pushed: {exc}")
                continue
            yield Record(kinds.KIND_OF[kind], kinds.pair_key(run, record_id), body)

    def _refuse_dependents(self, entries: dict[EntryAddress, tuple[bytes, Entry]]) -> None:
        """Refuse each entry that needs a refused object (its closure walked whole) or borrows from a refused entry."""
        if not self.refusals.objects and not self.refusals.entries:
            return
        for loc, (_raw, entry) in entries.items():
            if any(oid in self.refusals.objects for oid in self._closure(loc, entry, set())):
                self.refusals.entry(loc, "it needs a corrupt object or tree node")
        refused = -1
        while refused != len(self.refusals.entries):  # borrowing chains: until nothing more is refused
            refused = len(self.refusals.entries)
            for loc, (_raw, entry) in entries.items():
                if loc not in self.refusals.entries and any(dep in self.refusals.entries for dep in entry.borrowed()):
                    self.refusals.entry(loc, "it borrows from a checkpoint that was refused")

    def _checked_object(self, oid: bytes) -> Record | None:
        try:  # a damaged frame fails here already (its checksum): refused like a body that does not hash to its oid
            data = self.store.db.read_raw(oid)
            check_object(oid, data, f"local object {oid.hex()} in {self.store.root}", self.store.hasher)
        except AgentFSError as exc:
            self.refusals.object(oid, f"object not pushed: {exc}")
            return None
        return Record(kinds.OBJECT, oid, data)

    def _put_packs(self, records: Iterator[Record], stats: PushStats) -> list[Pack]:
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
        self, pool: ThreadPoolExecutor, indexer: ThreadPoolExecutor, records: Iterator[Record], stats: PushStats
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

    def _put_pack(self, records: list[Record], stats: PushStats, index_objects: Callable[[Pack], object]) -> Pack:
        """Put one pack up; one of objects only gets its index at once and its objects are noted as pushed, so
        a push cut short later does not upload them again. A pack holding entries is indexed by _put_indexes."""
        pack = encode_pack(self.store.sealed(records), self.writer)  # an encrypted store's packs hold what its segments do
        records.clear()  # the pack holds the bytes now: memory bound
        self.remote.put_pack(pack.pack_id, pack.data)
        with self._stats_lock:
            stats.bytes += len(pack.data)
        if self._bar is not None:
            self._bar.update(len(pack.data))
        pack = pack._replace(data=b"")  # what the index needs; the bytes are up
        if all(frame.kind == kinds.OBJECT for frame in pack.entries):
            index_objects(pack)
            return pack._replace(footer=b"")  # indexed: _put_indexes skips it
        return pack

    def _index_objects(self, pack: Pack) -> None:
        self._put_index(pack)
        self._place([(pack.pack_id, pack.entries)])
        self.index.add_objects([frame.key for frame in pack.entries])

    def _put_index(self, pack: Pack) -> None:
        self.remote.put_pack_index(pack.pack_id, pack.footer)
        self.remote.catalogue.keep_index(pack.pack_id, pack.footer)  # never fetched back by this store's confirmations

    def _put_indexes(self, pool: ThreadPoolExecutor, packs: list[Pack]) -> list[tuple[str, list[IndexEntry]]]:
        """Put up the indexes of packs that are up; (pack id, its records' places) of each."""
        # Hazard: a reader of every index (pull) that saw an entry's index before the index of the pack holding
        # its objects, or an entry it borrows from, would find it lacking them. Indexes of packs with no entry go
        # up first, together; then those with entries, one at a time in pack order (_records puts objects first
        # and every entry after those it borrows from).
        # (packs of objects only were indexed as they went up, _put_pack: their footer is dropped)
        unindexed = [pack for pack in packs if pack.footer]
        holds_entries = [any(frame.kind == kinds.ENTRY for frame in pack.entries) for pack in unindexed]
        for _ in pool.map(self._put_index, [pack for pack, entries in zip(unindexed, holds_entries, strict=True) if not entries]):
            pass
        for pack in [pack for pack, entries in zip(unindexed, holds_entries, strict=True) if entries]:
            self._put_index(pack)
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
        data = self.store.read_record(run, RETIRED_RECORDS, record_id)
        try:
            check_record(RETIRED_RECORDS, data or b"", run, record_id, self.store.where_stored(run, RETIRED_RECORDS, record_id))
        except AgentFSError:
            return  # refused (and reported) as its pack was made, or removed since
        body = bytes(self.store.sealed([Record(kinds.RETIRED, kinds.pair_key(run, record_id), data or b"")])[0].body)
        self.remote.put_retirement(run, record_id, body)

    def _put_head(self, run: str, checkpoint_id: str, entry: Entry) -> None:
        """The head key, last: it names the packs holding the entry and its closure, where this index knows them."""
        needed = [self._place_key(kinds.ENTRY, kinds.pair_key(run, checkpoint_id))]
        needed += [self._place_key(kinds.ENTRY, kinds.pair_key(*dep)) for dep in entry.borrowed()]
        needed += [self._place_key(kinds.OBJECT, oid) for oid in self._closure((run, checkpoint_id), entry, set())]
        packs = {self.index.places[key] for key in needed if key in self.index.places}
        stored = self.remote.stored_run(run)  # an encrypted store's head keys name no run
        held = self.remote.put_head(stored, checkpoint_id, encode_head(stored, checkpoint_id, sorted(packs)))
        if held is not None:  # pushed before (a recheck): any valid head key for it will do
            # an encrypted store's errors name no run
            named = f"{run}@{checkpoint_id}" if self.store.sealer is None else self.remote.head_key(stored, checkpoint_id)
            decode_head(held, stored, checkpoint_id, f"remote {self.remote.url} head key {named}")

    def _place_key(self, kind: int, key: bytes) -> str:
        """A record's name in the index's places: by its stored key in an encrypted store (no run name in the file)."""
        return place_key(kind, key if self.store.sealer is None else self.store.sealer.stored_key(kind, key))

    def _closure(self, loc: EntryAddress, entry: Entry, seen: set[bytes]) -> Iterator[bytes]:
        """The object files `entry` needs; a node that cannot be read stops the push (nothing corrupt goes up)."""
        labelled = ((f"{loc[0]}@{loc[1]} {label}", ref) for label, ref in entry.refs())
        for reached in reach(labelled, self.store.db.read_nodes, seen):
            if reached.error is not None:
                raise reached.error
            yield reached.oid
