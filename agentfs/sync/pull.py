"""Pull: fetch log entries and the objects they need, verifying every hash before it enters the store."""

from __future__ import annotations

import dataclasses
import logging
import sys
from concurrent.futures import ThreadPoolExecutor

from tqdm import tqdm

from ..engine.lineage import diverged
from ..engine.repository import Repository
from ..errors import AgentFSError, FormatError, NotFound, RemoteError, RetirementRefused
from ..format import kinds
from ..format.entries import Entry, decode_entry_at
from ..format.journal import decode_record
from ..format.keys import JOURNAL_RECORDS, LOG_RECORDS, RETIRED_RECORDS
from ..format.refs import EntryAddress
from ..format.retirement import decode_retirement
from ..format.walk import NODE, Children, Reached, reach
from .authority import Applied
from .pack_remote import PackRemote

log = logging.getLogger("agentfs.sync")

BATCH = 256


@dataclasses.dataclass
class PullStats:
    entries: int = 0
    objects: int = 0
    records: int = 0  # journal and retirement records
    bytes: int = 0
    repaired: list[EntryAddress] = dataclasses.field(default_factory=list)  # damaged local entries replaced by the remote's copy
    diverged: dict[str, list[str]] = dataclasses.field(default_factory=dict)  # run -> its heads, for pulled runs with several
    bar: tqdm[None] | None = dataclasses.field(default=None, repr=False, compare=False)  # byte progress, on a terminal
    retired: list[Applied] = dataclasses.field(default_factory=list)  # the remote's retirement records applied here
    refused: list[str] = dataclasses.field(default_factory=list)  # why each of its retirement records this store refused was
    skipped: list[str] = dataclasses.field(default_factory=list)  # records and packs that could not be pulled; the rest was


def pull(store: Repository, remote: PackRemote, runs: list[str] | None = None, *, progress: bool = False, workers: int = 8) -> PullStats:
    """Fetch every checkpoint of `runs` (default: all) that the store lacks, with all its objects."""
    remote.attach(store)
    entries = remote.list_all_entries()
    records = [r for r in remote.list_all_records((JOURNAL_RECORDS, RETIRED_RECORDS)) if runs is None or r[1] in runs]
    unknown = sorted(set(runs or ()) - {run for run, _id in entries} - {run for _kind, run, _id in records})
    if unknown:
        raise NotFound(f"run {', '.join(map(repr, unknown))} not found on {remote.url}")
    stats = PullStats()
    with ThreadPoolExecutor(workers, thread_name_prefix="agentfs-pull") as pool:
        # retirement records first: a checkpoint retention removed anywhere is never fetched back
        retirements = [(run, record_id) for kind, run, record_id in records if kind == RETIRED_RECORDS]
        for size in pool.map(lambda record: _pull_retirement(store, remote, record[0], record[1], stats), retirements):
            stats.records += size > 0
            stats.bytes += size
        retired = {run: store.retired_ids(run) for run in {run for run, _id in entries}}
        wanted = [loc for loc in entries if (runs is None or loc[0] in runs) and loc[1] not in retired[loc[0]]]
        stats.repaired = _damaged(store, wanted)
        missing = sorted((loc for loc in wanted if not store.has_entry(*loc)), key=lambda loc: (loc[1], loc[0]))
        missing += stats.repaired
        # bytes fetched, as they come (the closure's size is known only once its tree nodes are in)
        stats.bar = tqdm(unit="B", unit_scale=True, desc=f"pull {remote.url}", disable=not (progress and sys.stderr.isatty()))
        with stats.bar:
            for start in range(0, len(missing), BATCH):
                _pull_batch(store, remote, pool, missing[start : start + BATCH], stats)
        stats.bar = None
        journal = [record for record in records if record[0] != RETIRED_RECORDS]
        for size in pool.map(lambda record: _pull_journal(store, remote, record[1], record[2], stats), journal):
            stats.records += size > 0
            stats.bytes += size
    stats.skipped = [*remote.catalogue.skipped, *stats.skipped]
    pulled = {run for run, _id in wanted}  # format 1: reads every manifest of these runs, as _damaged did
    stats.diverged = diverged(store, pulled)
    if remote.index is not None:
        remote.index.note_divergence(pulled, stats.diverged)
    return stats


def _damaged(store: Repository, wanted: list[EntryAddress]) -> list[EntryAddress]:
    """Local entries among `wanted` that do not decode: pull replaces them with the remote's verified copy.

    Cost: every local entry the remote also holds is read and re-hashed once per pull.
    """
    damaged = []
    for loc in wanted:
        data = store.local_entry(*loc)
        if data is None:
            continue
        try:
            decode_entry_at(data, *loc, store.where_stored(loc[0], LOG_RECORDS, loc[1]), store.hasher)
        except AgentFSError:
            damaged.append(loc)
    return damaged


def _pull_record(store: Repository, remote: PackRemote, kind: str, run: str, record_id: str) -> int:
    """A journal or retirement record the store lacks, verified; its size, or 0 if the store had it."""
    if store.read_record(run, kind, record_id) is not None:
        return 0
    data = remote.fetch_record(kind, run, record_id)
    if data is None:
        return 0  # removed by a remote gc since it was listed
    check_record(kind, data, run, record_id, f"remote {remote.url} {run} {kind}/{record_id}")
    store.append_record(run, kind, record_id, data)
    return len(data)


def _pull_retirement(store: Repository, remote: PackRemote, run: str, record_id: str, stats: PullStats) -> int:
    """A retirement record the store lacks, verified and applied if the remote has the authority (sync/authority.py)."""
    if store.read_record(run, RETIRED_RECORDS, record_id) is not None:
        return 0
    try:
        data = remote.fetch_record(RETIRED_RECORDS, run, record_id)
        if data is None:
            return 0  # removed by a remote gc since it was listed
        record = decode_retirement(data, run, record_id, f"remote {remote.url} {run} retired/{record_id}")
        remote.check_retirement(record)
    except RetirementRefused as exc:
        stats.refused.append(str(exc))
        return 0
    except RemoteError:
        raise
    except AgentFSError as exc:
        _skip(remote, stats, kinds.RETIRED, run, record_id, exc)
        return 0
    removed = sorted(set(record.checkpoints) & set(store.local_ids(run)))
    store.append_record(run, RETIRED_RECORDS, record_id, data)
    stats.retired.append(Applied(remote.url, run, record_id, removed, len(record.checkpoints)))
    log.info("%s", stats.retired[-1].describe())
    return len(data)


def _pull_journal(store: Repository, remote: PackRemote, run: str, record_id: str, stats: PullStats) -> int:
    try:
        return _pull_record(store, remote, JOURNAL_RECORDS, run, record_id)
    except RemoteError:
        raise
    except AgentFSError as exc:
        _skip(remote, stats, kinds.JOURNAL, run, record_id, exc)
        return 0


def _skip(remote: PackRemote, stats: PullStats, kind: int, run: str, record_id: str, exc: AgentFSError) -> None:
    """One bad record is reported (naming its pack and key) and left out; the rest of the pull proceeds."""
    pack = remote.catalogue.pack_of(kind, kinds.pair_key(run, record_id))
    reason = f"skipped {kinds.NAMES[kind]} {run}@{record_id}" + (f" in pack {pack}" if pack else "") + f" of remote {remote.url}: {exc}"
    stats.skipped.append(reason)
    log.warning("%s", reason)


def check_record(kind: str, data: bytes, run: str, record_id: str, where: str) -> None:
    """Refuse a journal or retirement record that is damaged, malformed or not the one its key names."""
    if kind == JOURNAL_RECORDS:
        decode_record(data, run, record_id, where)
    else:
        decode_retirement(data, run, record_id, where)


def _pull_batch(store: Repository, remote: PackRemote, pool: ThreadPoolExecutor, batch: list[EntryAddress], stats: PullStats) -> None:
    repaired = set(stats.repaired)
    fetched = list(pool.map(lambda loc: _fetch_entry_or_skip(remote, loc, stats), batch))
    entries = {loc: got for loc, got in zip(batch, fetched, strict=True) if got is not None}
    outside = {dep for _raw, entry in entries.values() for dep in entry.borrowed()} - set(batch)
    outside = {dep for dep in outside if not store.has_entry(*dep)}
    if outside:  # entries of other runs whose packed objects these borrow (forks) come first
        _pull_batch(store, remote, pool, sorted(outside), stats)
    entries = _with_closures(store, remote, pool, entries, stats)
    for loc in _dependency_order(entries):
        raw, entry = entries[loc]
        store.install_entry(*loc, raw, entry, replace=loc in repaired)
        stats.entries += 1
        stats.bytes += len(raw)


def _fetch_entry_or_skip(remote: PackRemote, loc: EntryAddress, stats: PullStats) -> tuple[bytes, Entry] | None:
    try:
        return _fetch_entry(remote, loc)
    except RemoteError:
        raise
    except AgentFSError as exc:
        _skip(remote, stats, kinds.ENTRY, *loc, exc)
        return None


def _with_closures(
    store: Repository, remote: PackRemote, pool: ThreadPoolExecutor, entries: dict[EntryAddress, tuple[bytes, Entry]], stats: PullStats
) -> dict[EntryAddress, tuple[bytes, Entry]]:
    """Fetch the objects of `entries`; if some cannot be (a truncated or missing pack), entry by entry, leaving
    out (and reporting) those whose objects cannot be fetched."""
    try:
        fetch_closure(store, remote, pool, list(entries.values()), stats)
        return entries
    except RemoteError:
        raise
    except AgentFSError:
        pass
    complete = {}
    for loc, fetched in entries.items():
        try:
            fetch_closure(store, remote, pool, [fetched], stats)
        except RemoteError:
            raise
        except AgentFSError as exc:
            _skip(remote, stats, kinds.ENTRY, *loc, exc)
            continue
        complete[loc] = fetched
    return complete


def _fetch_entry(remote: PackRemote, loc: EntryAddress) -> tuple[bytes, Entry]:
    raw = remote.fetch_entry(*loc)
    if raw is None:
        raise FormatError(f"remote {remote.url}: checkpoint {loc[0]}@{loc[1]} vanished while pulling")
    return raw, decode_entry_at(raw, *loc, f"remote {remote.url} {loc[0]}@{loc[1]}", remote.hasher)


def fetch_closure(
    store: Repository, remote: PackRemote, pool: ThreadPoolExecutor, entries: list[tuple[bytes, Entry]], stats: PullStats
) -> None:
    """Fetch tree nodes a level at a time, then chunks and loose objects, all verified before they are stored."""

    def fetch(oids: list[bytes]) -> None:
        missing = [oid for oid in oids if not store.db.exists(oid)]
        for size in pool.map(lambda oid: _fetch_object(store, remote, oid), missing):
            stats.objects += 1
            stats.bytes += size
            if stats.bar is not None:
                stats.bar.update(size)

    def read_nodes(nodes: list[Reached]) -> list[Children | AgentFSError]:
        fetch([node.oid for node in nodes])
        return [store.db.read_node(node.oid, f"tree node {node.oid.hex()}") for node in nodes]  # a bad node stops the pull

    refs = ((label, ref) for _raw, entry in entries for label, ref in entry.refs())
    fetch([reached.oid for reached in reach(refs, read_nodes, set()) if reached.role != NODE])


def _fetch_object(store: Repository, remote: PackRemote, oid: bytes) -> int:
    blob = remote.fetch_object(oid)
    if blob is None:
        raise FormatError(f"remote {remote.url} lacks object {oid.hex()}")
    store.db.install(oid, blob, f"remote object {oid.hex()}")
    return len(blob)


def _dependency_order(entries: dict[EntryAddress, tuple[bytes, Entry]]) -> list[EntryAddress]:
    """Install an entry only after the entries it borrows packed objects from."""
    ordered: list[EntryAddress] = []
    placed: set[EntryAddress] = set()

    def place(loc: EntryAddress) -> None:
        if loc in placed:
            return
        placed.add(loc)
        for dep in entries[loc][1].borrowed():
            if dep in entries:
                place(dep)
        ordered.append(loc)

    for loc in sorted(entries, key=lambda loc: loc[1]):
        place(loc)
    return ordered
