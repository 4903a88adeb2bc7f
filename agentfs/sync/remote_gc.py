"""Remote gc: drop retired checkpoints and unreferenced objects from a remote while others push.

The hazard: a pusher skips uploading an object its index says the remote holds, so if gc deleted
that object between the pusher's look at the index and its entry landing, the entry would point at
nothing. The rule that closes it, in three markers under `gc/` on the remote:

1. `<gc>.intent`: gc announces itself, then waits `settle` seconds before its final listing.
   A pusher looks at `gc/` at most RECHECK seconds before it puts an entry, so an entry put by a
   pusher that had not yet seen the intent lands before the final listing, which marks what it uses.
2. `<gc>.plan`: what gc will delete (unreferenced objects older than `grace`, retired entries no
   remaining entry needs, retired journal records), and the time after which it deletes nothing more.
3. `<gc>.done`: deletion finished. A pusher that has seen an intent puts no entry until the plan is
   done (or past its deadline, or the intent is abandoned), then forgets the planned objects in its
   index, so it uploads any of them a new checkpoint needs again.

Clocks of gc and pushers may differ by up to CLOCK_MARGIN seconds.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import re
import sys
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from tqdm import tqdm
from ulid import ULID

from ..engine.repository import HOST, Repository
from ..errors import AgentFSError, FormatError, RemoteError
from ..format import codec, keys, kinds
from ..format.bounded_json import load_json
from ..format.entries import Entry, decode_entry_at
from ..format.keys import JOURNAL_RECORDS, LOG_RECORDS, RETIRED_RECORDS
from ..format.refs import EntryAddress, parse_node
from ..format.retirement import decode_retirement
from ..format.walk import Children, reach
from ..ids import new_id
from ..names import ID, check_id, check_name
from .index import PushIndex
from .leftovers import adopt_young, list_leftovers
from .pack_gc import packs_holding, repack
from .pack_remote import PackRemote
from .remote import Remote

log = logging.getLogger("agentfs.sync")
OID_HEX = re.compile(r"[0-9a-f]{64}")
SETTLE = 30.0
SLACK = 120.0  # gc gives up, deleting nothing, unless its plan is out this long after settling
DEADLINE = 600.0  # gc deletes nothing more this long after its plan
RECHECK = 2.0  # a pusher looks at gc/ again before an entry once its last look is this old
MIN_SETTLE = RECHECK + 1.0  # the rest of the settle period covers the entry's own PUT
CLOCK_MARGIN = 60.0
POLL = 0.5
MAX_MARKER = 256 << 20  # a plan lists every object it deletes


@dataclasses.dataclass
class RemoteGcReport:
    gc_id: str
    entries: int = 0  # log entries on the remote when gc started
    entries_deleted: int = 0
    journal_deleted: int = 0
    objects: int = 0
    objects_deleted: int = 0
    bytes_freed: int = 0
    kept_young: int = 0  # unreferenced but younger than the grace period
    packs_deleted: list[str] = dataclasses.field(default_factory=list)  # format 2: packs rewritten without what was deleted
    packs_made: list[str] = dataclasses.field(default_factory=list)  # format 2: the packs holding their live records
    leftovers_deleted: list[str] = dataclasses.field(default_factory=list)  # packs without an index, temporary keys: pushes cut short
    leftovers_adopted: list[str] = dataclasses.field(default_factory=list)  # young whole packs of objects it put the index of


def _marker(remote: Remote, name: str) -> str:
    return remote.key(*keys.gc_marker_key(name))


def _put_json(remote: Remote, name: str, record: dict[str, Any]) -> None:
    if not remote.create(_marker(remote, name), json.dumps(record).encode()):
        raise RemoteError(f"remote {remote.url}: gc marker {name} already exists")


def _get_json(remote: Remote, name: str) -> dict[str, Any]:
    where = f"remote {remote.url} gc marker {name}"
    data = remote.read(_marker(remote, name), MAX_MARKER)
    record = load_json(data, where, max_bytes=MAX_MARKER) if data is not None else None
    if not isinstance(record, dict):
        raise FormatError(f"{where} is missing or malformed")
    return record


def list_markers(remote: Remote) -> dict[str, set[str]]:
    """gc id -> the markers it has written ("intent", "plan", "done")."""
    markers: dict[str, set[str]] = {}
    for name in remote.list_names(remote.key(keys.GC)):
        gc_id, _, kind = name.partition(".")
        if ID.fullmatch(gc_id) and kind in ("intent", "plan", "done"):
            markers.setdefault(gc_id, set()).add(kind)
    return markers


class Marks:
    """What the remote's live checkpoints reference, built from its entries (local copies when the store has them)."""

    def __init__(self, remote: PackRemote, store: Repository | None, pool: ThreadPoolExecutor) -> None:
        self.remote = remote
        self.store = store
        self.pool = pool
        self.entries: set[EntryAddress] = set()
        self.retired: set[EntryAddress] = set()
        self.retired_journal: set[EntryAddress] = set()
        self.journal: set[EntryAddress] = set()
        self.kept: set[EntryAddress] = set()
        self.objects: set[bytes] = set()
        self._decoded: dict[EntryAddress, Entry] = {}

    def scan(self, records: Iterable[tuple[str, str, str]]) -> None:
        """Take in listed keys; mark everything the entries that stay (live, or needed by a live one) use."""
        fresh = [(kind, (run, rid)) for kind, run, rid in records]
        for kind, loc in fresh:
            if kind == RETIRED_RECORDS:
                self._retirement(loc)
        for kind, loc in fresh:
            if kind == JOURNAL_RECORDS:
                self.journal.add(loc)
        new_entries = {loc for kind, loc in fresh if kind == LOG_RECORDS} - self.entries
        self.entries |= new_entries
        self._keep([loc for loc in new_entries if loc not in self.retired])

    def _retirement(self, loc: EntryAddress) -> None:
        data = self.remote.fetch_record(RETIRED_RECORDS, *loc)
        try:
            if data is None:
                raise FormatError("vanished")
            record = decode_retirement(data, *loc, f"remote {self.remote.url} {loc[0]} retired/{loc[1]}")
        except AgentFSError as exc:  # ignoring it only keeps more: safe
            log.warning("remote gc: ignoring retirement record %s@%s: %s", loc[0], loc[1], exc)
            return
        self.retired.update((loc[0], cid) for cid in record.checkpoints)
        self.retired_journal.update((loc[0], jid) for jid in record.journal)

    def _keep(self, frontier: list[EntryAddress]) -> None:
        while frontier:
            todo = [loc for loc in frontier if loc not in self.kept]
            self.kept.update(todo)
            entries = list(self.pool.map(self._entry, todo))
            frontier = []
            for entry in entries:
                needs = set(entry.borrowed())
                if entry.manifest.forked_from is not None:
                    needs.add((entry.manifest.forked_from[0], entry.manifest.forked_from[1]))
                frontier.extend(dep for dep in needs if dep in self.entries and dep not in self.kept)
            for _ in self.pool.map(self._mark_entry, entries):
                pass

    def _entry(self, loc: EntryAddress) -> Entry:
        if self.store is not None and self.store.has_entry(*loc):
            return self.store.read_entry(*loc)
        data = self.remote.fetch_entry(*loc)
        if data is None:
            raise RemoteError(f"remote {self.remote.url}: entry {loc[0]}@{loc[1]} vanished during gc (another gc?)")
        return decode_entry_at(data, *loc, f"remote {self.remote.url} {loc[0]}@{loc[1]}", self.remote.hasher)  # malformed: gc stops

    def _mark_entry(self, entry: Entry) -> None:
        # entries are marked concurrently: two threads may both read a node, never leave one unmarked
        for _reached in reach(entry.refs(), lambda nodes: [self._node(node.oid) for node in nodes], self.objects):
            pass  # a node that cannot be read raised: gc stops rather than delete what is below it

    def _node(self, oid: bytes) -> Children:
        where = f"tree node {oid.hex()}"
        if self.store is not None and self.store.db.exists(oid):
            return self.store.db.read_node(oid, where)
        blob = self.remote.fetch_object(oid)
        if blob is None:
            raise RemoteError(f"remote {self.remote.url}: {where} is missing; run `agentfs verify --remote` (gc stopped)")
        return parse_node(codec.decode(blob, oid, f"remote {where}", self.remote.hasher), oid, where)


def remote_gc(
    remote: PackRemote,
    store: Repository | None = None,
    *,
    grace: float = 3600.0,
    settle: float = SETTLE,
    slack: float = SLACK,
    deadline: float = DEADLINE,
    workers: int = 16,
    progress: bool = False,
) -> RemoteGcReport:
    """Delete what no remaining remote entry references; safe while other machines push (see module doc)."""
    if settle < MIN_SETTLE:
        raise ValueError(f"settle must be at least {MIN_SETTLE:g} s: pushers look at gc/ every {RECHECK:g} s")
    remote.use_keys(store.sealer if store is not None else remote.sealer)  # an encrypted remote: the store's keys
    gc_id = new_id()
    report = RemoteGcReport(gc_id)
    started = time.time()
    writer = {"host": HOST, "pid": os.getpid()}
    _put_json(remote.transport, f"{gc_id}.intent", {"format": 1, "created": started, "settle": settle, "slack": slack, **writer})
    with ThreadPoolExecutor(workers, thread_name_prefix="agentfs-gc") as pool:
        try:
            marks = Marks(remote, store, pool)
            marks.scan(remote.list_all_records())
            waiting = f"gc {remote.url}: waiting {settle:g} s (settle time) for pushers that have not seen this gc"
            wait_out(started + settle, waiting, progress)
            marks.scan(remote.list_all_records())  # entries pushed meanwhile: what they use stays
            # Hazard: with a grace period under ADOPT_AGE, gc deleted as a leftover a young pack that a pusher was
            # adopting (putting its index) that moment: an index naming a deleted pack, its objects vouched for.
            # gc adopts such packs itself first (create-only: the same index bytes a pusher puts); their objects
            # are then ordinary unreferenced objects, deleted through the plan pushers honour
            # (tests/sync/test_push_resume.py::test_gc_with_a_short_grace_adopts_a_young_pack_instead_of_deleting_it).
            remote.catalogue.pack_ids()
            adopted = adopt_young(remote)
            listed = remote.list_objects()
            leftovers = list_leftovers(remote)
        except BaseException as exc:
            _put_json(remote.transport, f"{gc_id}.done", {"format": 1, "aborted": f"{type(exc).__name__}: {exc}"[:500]})
            raise
        report.leftovers_adopted = adopted
        doomed_entries = sorted(marks.entries - marks.kept)
        doomed_journal = sorted(marks.journal & marks.retired_journal)
        cutoff = time.time() - grace
        unmarked = {oid: info for oid, info in listed.items() if oid not in marks.objects}
        doomed_objects = sorted(oid for oid, (mtime, _size) in unmarked.items() if mtime < cutoff)
        report.entries, report.objects = len(marks.entries), len(listed)
        report.kept_young = len(unmarked) - len(doomed_objects)
        if time.time() > started + settle + slack:
            _put_json(remote.transport, f"{gc_id}.done", {"format": 1, "aborted": "marking took longer than the slack"})
            raise RemoteError(f"remote gc of {remote.url} took over {slack:.0f}s to mark after settling; nothing deleted")
        stop_at = time.time() + deadline
        plan = {
            "format": 1,
            "created": time.time(),
            "deadline": stop_at,
            "objects": [oid.hex() for oid in doomed_objects],
            # runs by the names the remote's keys use (an encrypted remote's stored names)
            "entries": [[remote.stored_run(run), record_id] for run, record_id in doomed_entries],
            "journal": [[remote.stored_run(run), record_id] for run, record_id in doomed_journal],
        }
        # the packs holding what goes are rewritten (pack_gc.py)
        doomed = {(kinds.OBJECT, oid) for oid in doomed_objects} | {(kinds.ENTRY, kinds.pair_key(*loc)) for loc in doomed_entries}
        doomed |= {(kinds.JOURNAL, kinds.pair_key(*loc)) for loc in doomed_journal}
        holding = plan["packs"] = packs_holding(remote, doomed)
        # a pusher puts a pack's index (or links a temporary key) right after it: one this old was abandoned
        abandoned = [leftover for leftover in leftovers if leftover.modified < cutoff]
        plan["leftovers"] = [leftover.key for leftover in abandoned]
        _put_json(remote.transport, f"{gc_id}.plan", plan)
        repacked = repack(remote, holding, doomed, ULID.from_str(gc_id).bytes, pool, stop_at, progress=progress)
        for leftover in abandoned:
            if time.time() > stop_at:
                raise RemoteError(f"remote gc of {remote.url} passed its deadline; the rest is left for the next gc")
            remote.transport.delete(leftover.key)
            report.leftovers_deleted.append(leftover.key)
            repacked.bytes_freed += leftover.size
        report.bytes_freed, report.packs_deleted, report.packs_made = repacked.bytes_freed, repacked.deleted, repacked.made
        report.journal_deleted, report.entries_deleted = len(doomed_journal), len(doomed_entries)
        report.objects_deleted = len(doomed_objects)
    _put_json(remote.transport, f"{gc_id}.done", {"format": 1, "created": time.time(), **dataclasses.asdict(report)})
    return report


def wait_out(until: float, what: str, progress: bool) -> None:
    """Sleep until `until` (seconds since the epoch), saying what for on a terminal (a bar counting the seconds down)."""
    left = until - time.time()
    if left <= 0:
        return
    with tqdm(total=round(left), unit="s", desc=what, disable=not (progress and sys.stderr.isatty())) as bar:
        while (left := until - time.time()) > 0:
            time.sleep(min(1.0, left))
            bar.n = round(bar.total - max(0.0, until - time.time()))
            bar.refresh()


class GcBarrier:
    """The pusher's side of the rule: look at gc/ before putting entries; wait out a running gc; apply its plan."""

    def __init__(self, remote: PackRemote, index: PushIndex) -> None:
        self.remote = remote
        self.index = index
        self.checked = float("-inf")  # monotonic time of the last look, taken before the listing
        self.notice: Callable[[str], None] = lambda _what: None  # says what a push waits for (its progress bar)

    def check(self, stop: threading.Event | None = None, force: bool = False) -> bool:
        """True if a finished gc changed the index: objects it vouched for may be gone."""
        if not force and time.monotonic() - self.checked < RECHECK:
            return False
        changed = waited = False
        while True:
            looked = time.monotonic()
            pending = {g: kinds for g, kinds in list_markers(self.remote.transport).items() if g not in self.index.gc_seen}
            running = []
            for gc_id, markers in sorted(pending.items()):
                try:
                    if not self._settled(gc_id, markers):
                        running.append(gc_id)
                        continue
                    changed |= self._apply(gc_id, markers)
                except FormatError as exc:  # not written by a gc (they write well-formed markers): skipped, never blocking pushes
                    log.warning("agentfs sync: skipping remote gc %s: %s", gc_id, exc)
                    self.index.apply_gc(gc_id, set(), set())
            if not running:
                if waited:
                    self.notice("")
                self.checked = looked
                return changed
            log.info("agentfs sync: waiting for remote gc %s on %s to finish", running[0], self.remote.url)
            if not waited:
                self.notice(f"waiting for remote gc {running[0]} to finish")
                waited = True
            if stop is not None and stop.wait(POLL):
                raise InterruptedError("push stopped while a remote gc was running")
            if stop is None:
                time.sleep(POLL)

    def _settled(self, gc_id: str, kinds: set[str]) -> bool:
        if "done" in kinds:
            return True
        now = time.time()
        if "plan" in kinds:
            return now > float(_get_json(self.remote.transport, f"{gc_id}.plan").get("deadline", 0)) + CLOCK_MARGIN
        intent = _get_json(self.remote.transport, f"{gc_id}.intent")  # no plan in time: that gc gave up or died, deleting nothing
        abandoned_at = float(intent.get("created", 0)) + float(intent.get("settle", SETTLE)) + float(intent.get("slack", SLACK))
        return now > abandoned_at + CLOCK_MARGIN

    def _apply(self, gc_id: str, kinds: set[str]) -> bool:
        objects: set[bytes] = set()
        entries: set[EntryAddress] = set()
        if "plan" in kinds:
            plan = _get_json(self.remote.transport, f"{gc_id}.plan")
            try:
                objects = {bytes.fromhex(h) for h in plan.get("objects", []) if isinstance(h, str) and OID_HEX.fullmatch(h)}
                entries = {(self.remote.run_name(check_name(run)), check_id(cid)) for run, cid in plan.get("entries", [])}
            except (ValueError, TypeError) as exc:
                raise FormatError(f"remote {self.remote.url}: gc plan {gc_id} is malformed: {exc}") from None
        changed = bool(objects & self.index.objects) or bool(entries - self.index.gone)
        self.index.apply_gc(gc_id, objects, entries)
        return changed
