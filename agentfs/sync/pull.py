"""Pull: fetch log entries and the objects they need, verifying every hash before it enters the store."""

from __future__ import annotations

import dataclasses
import sys
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING

from tqdm import tqdm

from ..errors import FormatError, NotFound
from ..fsutil import write_atomic
from ..objects.blobs import LOOSE, TREE, Location, read_node
from ..store.entries import Entry, decode_entry_at
from ..store.journal import decode_record
from ..store.retention import decode_retirement
from ..store.store import JOURNAL, RETIRED
from .remote import Remote

if TYPE_CHECKING:
    from ..store.store import Store

BATCH = 256


@dataclasses.dataclass
class PullStats:
    entries: int = 0
    objects: int = 0
    records: int = 0  # journal and retirement records
    bytes: int = 0


def pull(store: Store, remote: Remote, runs: list[str] | None = None, *, progress: bool = False, workers: int = 8) -> PullStats:
    """Fetch every checkpoint of `runs` (default: all) that the store lacks, with all its objects."""
    remote.attach(store)
    entries = remote.list_all_entries()
    records = [r for r in remote.list_all_records((JOURNAL, RETIRED)) if runs is None or r[1] in runs]
    unknown = sorted(set(runs or ()) - {run for run, _id in entries} - {run for _kind, run, _id in records})
    if unknown:
        raise NotFound(f"run {', '.join(map(repr, unknown))} not found on {remote.url}")
    wanted = [loc for loc in entries if runs is None or loc[0] in runs]
    missing = sorted((loc for loc in wanted if not store.entry_path(*loc).is_file()), key=lambda loc: (loc[1], loc[0]))
    stats = PullStats()
    bar = tqdm(total=len(missing), unit="checkpoint", desc=f"pull {remote.url}", disable=not (progress and sys.stderr.isatty()))
    with bar, ThreadPoolExecutor(workers, thread_name_prefix="agentfs-pull") as pool:
        for start in range(0, len(missing), BATCH):
            batch = missing[start : start + BATCH]
            _pull_batch(store, remote, pool, batch, stats)
            bar.update(len(batch))
        for size in pool.map(lambda record: _pull_record(store, remote, *record), records):
            stats.records += size > 0
            stats.bytes += size
    return stats


def _pull_record(store: Store, remote: Remote, kind: str, run: str, record_id: str) -> int:
    """A journal or retirement record the store lacks, verified; its size, or 0 if the store had it."""
    path = store.record_dir(run, kind) / record_id
    if path.is_file():
        return 0
    data = remote.fetch_record(kind, run, record_id)
    if data is None:
        return 0  # removed by a remote gc since it was listed
    check_record(kind, data, run, record_id, f"remote {remote.url} {run} {kind}/{record_id}")
    write_atomic(store.tmp_dir, path, data, sync=store.sync_writes)
    return len(data)


def check_record(kind: str, data: bytes, run: str, record_id: str, where: str) -> None:
    """Refuse a journal or retirement record that is damaged, malformed or not the one its key names."""
    if kind == JOURNAL:
        decode_record(data, run, record_id, where)
    else:
        decode_retirement(data, run, record_id, where)


def _pull_batch(store: Store, remote: Remote, pool: ThreadPoolExecutor, batch: list[Location], stats: PullStats) -> None:
    fetched = list(pool.map(lambda loc: _fetch_entry(remote, loc), batch))
    entries = dict(zip(batch, fetched, strict=True))
    outside = {dep for _raw, entry in fetched for dep in entry.borrowed()} - set(entries)
    outside = {dep for dep in outside if not store.entry_path(*dep).is_file()}
    if outside:  # entries of other runs whose packed objects these borrow (forks) come first
        _pull_batch(store, remote, pool, sorted(outside), stats)
    _fetch_closure(store, remote, pool, fetched, stats)
    for loc in _dependency_order(entries):
        raw, entry = entries[loc]
        store.install_entry(*loc, raw, entry)
        stats.entries += 1
        stats.bytes += len(raw)


def _fetch_entry(remote: Remote, loc: Location) -> tuple[bytes, Entry]:
    raw = remote.fetch_entry(*loc)
    if raw is None:
        raise FormatError(f"remote {remote.url}: checkpoint {loc[0]}@{loc[1]} vanished while pulling")
    return raw, decode_entry_at(raw, *loc, f"remote {remote.url} {loc[0]}@{loc[1]}")


def _fetch_closure(store: Store, remote: Remote, pool: ThreadPoolExecutor, entries: list[tuple[bytes, Entry]], stats: PullStats) -> None:
    """Fetch tree nodes level by level, then chunks, all verified before they are stored."""
    level: set[tuple[bytes, int]] = set()  # (oid, depth): depth 0 is a chunk or a loose value
    for _raw, entry in entries:
        for _label, ref in entry.refs():
            if ref[0] == LOOSE:
                level.add((ref[1], 0))
            elif ref[0] == TREE:
                level.add((ref[1], ref[3]))
    seen: set[bytes] = set()
    while level:
        todo = [(oid, depth) for oid, depth in level if oid not in seen]
        seen.update(oid for oid, _ in todo)
        missing = [oid for oid, _ in todo if not store.db.exists(oid)]
        for size in pool.map(lambda oid: _fetch_object(store, remote, oid), missing):
            stats.objects += 1
            stats.bytes += size
        level = set()
        for oid, depth in todo:
            if depth > 0:
                level.update((child, depth - 1) for child, _size in read_node(store.db, oid, f"tree node {oid.hex()}"))


def _fetch_object(store: Store, remote: Remote, oid: bytes) -> int:
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
