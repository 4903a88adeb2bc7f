"""Push to a remote: the new records of a batch as packs, then the packs' indexes, then head keys.

In that order, each step waiting for the one before: a reader that sees a head key finds every pack
index it needs, and every index names a pack that is whole. The packs go up through a PackUploader
(pack_upload.py: a pack of objects only is indexed as soon as it is up, memory stays bounded);
every record is verified before it is packed, so nothing corrupt goes up. What the remote holds, by
its pack indexes, is skipped: the push index is confirmed against them before a head is published.
"""

from __future__ import annotations

import dataclasses
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

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
from ..format.pack import decode_head, encode_head
from ..format.refs import EntryAddress
from ..format.segment import Record
from ..format.walk import reach
from ..ids import id_time_ns
from .index import PushIndex, remember_url
from .outgoing import Holdings, Refusals, borrowed_first, check_entry, check_object
from .pack_remote import PackRemote
from .pack_upload import PACK_TARGET, PackUploader, UploadCounts
from .pull import check_record
from .remote_gc import GcBarrier

BATCH = 1024
CHECK_WINDOW = 16  # objects read and verified at once before packing (bounds memory: 16 chunks, ~64 KiB to 1 MiB each)


@dataclasses.dataclass
class PushStats(UploadCounts):
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


class Pusher:
    batch_size = BATCH

    def __init__(self, store: Repository, remote: PackRemote, *, workers: int = 16, pack_target: int = PACK_TARGET) -> None:
        self.store = store
        self.remote = remote
        self.workers = workers
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
        self.refusals = Refusals()
        self.uploads = PackUploader(store, remote, self.index, self.writer, pack_target)

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
        self.uploads.bar = bar
        self.barrier.notice = lambda waiting: bar.set_description_str(f"{title}: {waiting}" if waiting else title)
        with bar, ThreadPoolExecutor(self.workers, thread_name_prefix="agentfs-push") as pool:
            for start in range(0, max(len(pending), 1), self.batch_size):
                if stop is not None and stop.is_set():
                    break
                batch = pending[start : start + self.batch_size]
                self._push_part(pool, batch, records if start == 0 else [], stats, stop)
        self.uploads.bar = None
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
            self.uploads.place(self.uploads.put_indexes(pool, self.uploads.put_packs(self._records(pool, [oid], {}, []), stats)))
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
        if self.uploads.bar is not None:
            self.uploads.bar.total = (self.uploads.bar.total or 0) + self._sizes(oids) + sum(len(raw) for raw, _entry in entries.values())
            self.uploads.bar.refresh()
        uploads = self.uploads.put_packs(self._records(pool, oids, entries, records), stats)
        if self.barrier.check(stop):  # a remote gc finished since the look above: what the index vouched for may be gone
            sent = set(oids)
            again = [oid for loc, (_raw, entry) in entries.items() for oid in self._closure(loc, entry, set())]
            gone = sorted({oid for oid in again if oid not in self.index.objects} - sent)
            uploads += self.uploads.put_packs(self._records(pool, gone, {}, []), stats)
        self.uploads.place(self.uploads.put_indexes(pool, uploads))
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
        needed = [self.uploads.place_key(kinds.ENTRY, kinds.pair_key(run, checkpoint_id))]
        needed += [self.uploads.place_key(kinds.ENTRY, kinds.pair_key(*dep)) for dep in entry.borrowed()]
        needed += [self.uploads.place_key(kinds.OBJECT, oid) for oid in self._closure((run, checkpoint_id), entry, set())]
        packs = {self.index.places[key] for key in needed if key in self.index.places}
        stored = self.remote.stored_run(run)  # an encrypted store's head keys name no run
        held = self.remote.put_head(stored, checkpoint_id, encode_head(stored, checkpoint_id, sorted(packs)))
        if held is not None:  # pushed before (a recheck): any valid head key for it will do
            # an encrypted store's errors name no run
            named = f"{run}@{checkpoint_id}" if self.store.sealer is None else self.remote.head_key(stored, checkpoint_id)
            decode_head(held, stored, checkpoint_id, f"remote {self.remote.url} head key {named}")

    def _closure(self, loc: EntryAddress, entry: Entry, seen: set[bytes]) -> Iterator[bytes]:
        """The object files `entry` needs; a node that cannot be read stops the push (nothing corrupt goes up)."""
        labelled = ((f"{loc[0]}@{loc[1]} {label}", ref) for label, ref in entry.refs())
        for reached in reach(labelled, self.store.db.read_nodes, seen):
            if reached.error is not None:
                raise reached.error
            yield reached.oid
