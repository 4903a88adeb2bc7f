"""Pull: fetch log entries and the objects they need, verifying every hash before it enters the store."""

from __future__ import annotations

import dataclasses
import sys
from concurrent.futures import ThreadPoolExecutor

from tqdm import tqdm

from ..engine.lineage import diverged
from ..engine.repository import Repository
from ..errors import AgentFSError, FormatError, NotFound
from ..format.entries import Entry, decode_entry_at
from ..format.journal import decode_record
from ..format.keys import JOURNAL, LOG, RETIRED
from ..format.refs import Location
from ..format.retirement import decode_retirement
from ..format.walk import NODE, Children, Reached, reach
from .pack_remote import PackRemote

BATCH = 256


@dataclasses.dataclass
class PullStats:
    entries: int = 0
    objects: int = 0
    records: int = 0  # journal and retirement records
    bytes: int = 0
    repaired: list[Location] = dataclasses.field(default_factory=list)  # damaged local entries replaced by the remote's copy
    diverged: dict[str, list[str]] = dataclasses.field(default_factory=dict)  # run -> its heads, for pulled runs with several
    bar: tqdm[None] | None = dataclasses.field(default=None, repr=False, compare=False)  # byte progress, on a terminal


def pull(store: Repository, remote: PackRemote, runs: list[str] | None = None, *, progress: bool = False, workers: int = 8) -> PullStats:
    """Fetch every checkpoint of `runs` (default: all) that the store lacks, with all its objects."""
    remote.attach(store)
    entries = remote.list_all_entries()
    records = [r for r in remote.list_all_records((JOURNAL, RETIRED)) if runs is None or r[1] in runs]
    unknown = sorted(set(runs or ()) - {run for run, _id in entries} - {run for _kind, run, _id in records})
    if unknown:
        raise NotFound(f"run {', '.join(map(repr, unknown))} not found on {remote.url}")
    stats = PullStats()
    with ThreadPoolExecutor(workers, thread_name_prefix="agentfs-pull") as pool:
        # retirement records first: a checkpoint retention removed anywhere is never fetched back
        retirements = [record for record in records if record[0] == RETIRED]
        for size in pool.map(lambda record: _pull_record(store, remote, *record), retirements):
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
        journal = [record for record in records if record[0] != RETIRED]
        for size in pool.map(lambda record: _pull_record(store, remote, *record), journal):
            stats.records += size > 0
            stats.bytes += size
    pulled = {run for run, _id in wanted}  # format 1: reads every manifest of these runs, as _damaged did
    stats.diverged = diverged(store, pulled)
    if remote.index is not None:
        remote.index.note_divergence(pulled, stats.diverged)
    return stats


def _damaged(store: Repository, wanted: list[Location]) -> list[Location]:
    """Local entries among `wanted` that do not decode: pull replaces them with the remote's verified copy.

    Cost: every local entry the remote also holds is read and re-hashed once per pull.
    """
    damaged = []
    for loc in wanted:
        data = store.local_entry(*loc)
        if data is None:
            continue
        try:
            decode_entry_at(data, *loc, store.where_stored(loc[0], LOG, loc[1]), store.hasher)
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


def check_record(kind: str, data: bytes, run: str, record_id: str, where: str) -> None:
    """Refuse a journal or retirement record that is damaged, malformed or not the one its key names."""
    if kind == JOURNAL:
        decode_record(data, run, record_id, where)
    else:
        decode_retirement(data, run, record_id, where)


def _pull_batch(store: Repository, remote: PackRemote, pool: ThreadPoolExecutor, batch: list[Location], stats: PullStats) -> None:
    repaired = set(stats.repaired)
    fetched = list(pool.map(lambda loc: _fetch_entry(remote, loc), batch))
    entries = dict(zip(batch, fetched, strict=True))
    outside = {dep for _raw, entry in fetched for dep in entry.borrowed()} - set(entries)
    outside = {dep for dep in outside if not store.has_entry(*dep)}
    if outside:  # entries of other runs whose packed objects these borrow (forks) come first
        _pull_batch(store, remote, pool, sorted(outside), stats)
    fetch_closure(store, remote, pool, fetched, stats)
    for loc in _dependency_order(entries):
        raw, entry = entries[loc]
        store.install_entry(*loc, raw, entry, replace=loc in repaired)
        stats.entries += 1
        stats.bytes += len(raw)


def _fetch_entry(remote: PackRemote, loc: Location) -> tuple[bytes, Entry]:
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


def _dependency_order(entries: dict[Location, tuple[bytes, Entry]]) -> list[Location]:
    """Install an entry only after the entries it borrows packed objects from."""
    ordered: list[Location] = []
    placed: set[Location] = set()

    def place(loc: Location) -> None:
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
