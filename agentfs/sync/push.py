"""Push: every local checkpoint's objects, then its log entry, concurrently, skipping what is known pushed."""

from __future__ import annotations

import dataclasses
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

from tqdm import tqdm

from ..engine.lineage import diverged
from ..engine.repository import Repository
from ..errors import AgentFSError, NotFound
from ..format.config import remote_config
from ..format.entries import Entry
from ..format.keys import JOURNAL, LOG, RETIRED
from ..format.refs import Location
from ..format.walk import reach
from ..ids import id_time_ns
from .index import PushIndex, remember_url
from .outgoing import Refusals, check_entry, check_object
from .pull import check_record
from .remote import Remote
from .remote_gc import GcBarrier

BATCH = 512


@dataclasses.dataclass
class PushStats:
    entries: int = 0
    objects: int = 0
    objects_present: int = 0
    records: int = 0  # journal and retirement records
    bytes: int = 0
    seconds: float = 0.0
    refused: list[str] = dataclasses.field(default_factory=list)  # corrupt local records, not pushed: why, each
    diverged: dict[str, list[str]] = dataclasses.field(default_factory=dict)  # run -> its heads, for pushed runs with several


def lag_seconds(pending: list[Location]) -> float:
    """Age of the oldest checkpoint the remote lacks (its id holds its time); 0 when none."""
    oldest = min((id_time_ns(cid) for _run, cid in pending), default=None)
    return 0.0 if oldest is None else max(0.0, time.time() - oldest / 1e9)


def local_records(store: Repository) -> list[tuple[str, str, str]]:
    """(kind, run, id) of every journal and retirement record in the store."""
    return [(kind, *loc) for kind in (JOURNAL, RETIRED) for loc in store.local_records(kind)]


class Pusher:
    batch_size = BATCH

    def __init__(self, store: Repository, remote: Remote, *, workers: int = 16) -> None:
        self.store = store
        self.remote = remote
        self.workers = workers
        # one index per remote and process: what a resume fetched counts as already there
        self.index = remote.index or PushIndex(store.remote_state_dir(remote.name))
        remote.index = self.index
        remember_url(self.index.directory, remote.url)
        self._config_checked = False
        self.barrier = GcBarrier(remote, self.index)
        self.last_scan: list[Location] = []  # what the last push found pending: status without a rescan
        self._stats_lock = threading.Lock()
        self.refusals = Refusals()

    def pending(self) -> list[Location]:
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
        bar = tqdm(total=len(pending), unit="checkpoint", desc=f"push {self.remote.url}", disable=not (progress and sys.stderr.isatty()))
        with bar, ThreadPoolExecutor(self.workers, thread_name_prefix="agentfs-push") as pool:
            for start in range(0, max(len(pending), 1), self.batch_size):
                if stop is not None and stop.is_set():
                    break
                batch = pending[start : start + self.batch_size]
                self._push_part(pool, batch, records if start == 0 else [], stats, stop)
                bar.update(len(batch))
        pushed = {run for run, _id in pending}
        stats.diverged = diverged(self.store, pushed)
        self.index.note_divergence(pushed, stats.diverged)
        stats.seconds = time.monotonic() - started
        stats.refused = self.refusals.reasons
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
        self._config_checked = True

    def _push_part(
        self,
        pool: ThreadPoolExecutor,
        batch: list[Location],
        records: list[tuple[str, str, str]],
        stats: PushStats,
        stop: threading.Event | None,
    ) -> None:
        """Push journal and retirement `records` (they need nothing else up first), then a batch of entries."""
        for _ in pool.map(lambda record: self._push_record(record, stats), records):
            pass
        if not batch:
            return
        try:
            self._push_batch(pool, batch, stats, stop)
        except NotFound:  # a local prune and gc raced this batch: push what is still there
            self._push_batch(pool, [loc for loc in batch if self.store.has_entry(*loc)], stats, stop)  # true damage raises again

    def _push_batch(self, pool: ThreadPoolExecutor, batch: list[Location], stats: PushStats, stop: threading.Event | None) -> None:
        entries: dict[Location, Entry] = {}
        for loc in batch:
            try:
                entries[loc] = self.store.read_entry(*loc)
            except NotFound:
                raise
            except AgentFSError as exc:  # a damaged entry stays local; the rest goes up
                self.refusals.entry(loc, str(exc))
        self.barrier.check(stop, force=True)
        self._push_objects(pool, entries, stats, stop)
        for wave in self._waves(entries):
            if stop is not None and stop.is_set():
                return
            if self.barrier.check(stop):  # a remote gc finished since the objects went up: some may be gone
                self._push_objects(pool, entries, stats, stop)
            for _ in pool.map(lambda loc: self._push_entry(loc, stats), wave):
                pass

    def _push_objects(
        self, pool: ThreadPoolExecutor, entries: dict[Location, Entry], stats: PushStats, stop: threading.Event | None
    ) -> None:
        needed: list[bytes] = []
        seen: set[bytes] = set()
        for loc, entry in entries.items():
            try:
                needed.extend(oid for oid in self._closure(loc, entry, seen) if oid not in self.index.objects)
            except AgentFSError as exc:  # a corrupt tree node: this checkpoint stays local, the rest goes up
                self.refusals.entry(loc, str(exc))
        for _ in pool.map(lambda oid: self.push_object(oid, stats, stop), needed):
            pass
        if self.refusals.objects or self.refusals.entries:
            for loc, entry in entries.items():
                if loc not in self.refusals.entries and self._needs_refused(loc, entry):
                    self.refusals.entry(loc, "it needs a corrupt object or tree node")

    def _needs_refused(self, loc: Location, entry: Entry) -> bool:
        """Whether `entry`'s closure (walked whole: a shared `seen` hides what another entry reached) holds a refused object."""
        try:
            return any(oid in self.refusals.objects for oid in self._closure(loc, entry, set()))
        except AgentFSError:
            return True

    def _push_record(self, record: tuple[str, str, str], stats: PushStats) -> None:
        kind, run, record_id = record
        data = self.store.read_record(run, kind, record_id)
        if data is None:
            return  # removed by retention since it was listed
        where = f"{run} {kind}/{record_id} ({self.store.where_stored(run, kind, record_id)})"
        try:
            check_record(kind, data, run, record_id, where)
        except AgentFSError as exc:
            self.refusals.record(f"{kind} record not pushed: {exc}")
            return
        created = self.remote.create(self.remote.record_key(kind, run, record_id), data)
        self.index.add_records([record])
        if created:
            with self._stats_lock:
                stats.records += 1
                stats.bytes += len(data)

    def push_object(self, oid: bytes, stats: PushStats, stop: threading.Event | None = None) -> None:
        """Upload one local object file, re-hashed first (a corrupt one is refused and named)."""
        if stop is not None and stop.is_set():
            return
        data = self.store.db.read_raw(oid)
        try:
            check_object(oid, data, f"local object {oid.hex()} in {self.store.root}")
        except AgentFSError as exc:
            self.refusals.object(oid, f"object not pushed: {exc}")
            return
        # one conditional PUT, no HEAD first: on object stores requests, not bytes, bound the push rate
        created = self.remote.create(self.remote.object_key(oid), data)
        self.index.add_objects([oid])
        with self._stats_lock:
            if created:
                stats.objects += 1
                stats.bytes += len(data)
            else:
                stats.objects_present += 1

    def _push_entry(self, loc: Location, stats: PushStats) -> None:
        if loc in self.refusals.entries:
            return
        if any(dep in self.refusals.entries for dep in self.store.read_entry(*loc).borrowed()):
            self.refusals.entry(loc, "it borrows from a checkpoint that was refused")
            return
        data = self.store.local_entry(*loc)
        if data is None:
            raise NotFound(f"checkpoint {loc[1]} of run {loc[0]!r} was removed while pushing")
        try:
            check_entry(loc, data, f"{loc[0]}@{loc[1]} ({self.store.where_stored(loc[0], LOG, loc[1])})")
        except AgentFSError as exc:
            self.refusals.entry(loc, str(exc))
            return
        created = self.remote.create(self.remote.entry_key(*loc), data)
        self.index.add_entries([loc])
        if created:
            with self._stats_lock:
                stats.entries += 1
                stats.bytes += len(data)

    def _waves(self, entries: dict[Location, Entry]) -> Iterator[list[Location]]:
        """Entries in groups that can go up together: an entry after every entry it borrows packed objects from."""
        deps = {loc: {dep for dep in entry.borrowed() if dep != loc} for loc, entry in entries.items()}
        for needs in deps.values():
            for dep in list(needs):
                if dep in entries:
                    continue
                needs.discard(dep)
                missing = dep not in self.index.entries and not self.remote.exists(self.remote.entry_key(*dep))
                if dep in self.index.gone or missing:
                    # borrowed from an entry outside this batch that is not up yet (a fork of another run),
                    # or that a remote gc removed as retired: this new checkpoint needs it back
                    self._push_entry_now(dep)
                    self.index.restored(dep)
        done: set[Location] = set()
        remaining = dict(deps)
        while remaining:
            wave = [loc for loc, needs in remaining.items() if needs <= done]
            if not wave:  # a cycle cannot come from commits; push the rest in id order
                wave = sorted(remaining, key=lambda loc: loc[1])[:1]
            yield wave
            done.update(wave)
            for loc in wave:
                del remaining[loc]

    def _push_entry_now(self, loc: Location) -> None:
        entry = self.store.read_entry(*loc)
        for oid in self._closure(loc, entry, set()):
            if oid not in self.index.objects:
                self.push_object(oid, PushStats())
        self._push_entry(loc, PushStats())

    def _closure(self, loc: Location, entry: Entry, seen: set[bytes]) -> Iterator[bytes]:
        """The object files `entry` needs; a node that cannot be read stops the push (nothing corrupt goes up)."""
        labelled = ((f"{loc[0]}@{loc[1]} {label}", ref) for label, ref in entry.refs())
        for reached in reach(labelled, self.store.db.read_nodes, seen):
            if reached.error is not None:
                raise reached.error
            yield reached.oid
