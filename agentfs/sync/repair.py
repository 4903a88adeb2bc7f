"""Repair: replace a store's corrupt or missing objects, entries and records with verified remote copies.

Every byte fetched is verified exactly as a pull verifies it before it replaces anything: a remote copy
that does not verify is reported and the local one left as it was.
"""

from __future__ import annotations

import dataclasses
from concurrent.futures import ThreadPoolExecutor

from ..engine.maintenance import salvage
from ..engine.repository import Repository
from ..errors import AgentFSError, ObjectMissing
from ..format import codec
from ..format.entries import Entry, decode_entry_at
from ..format.keys import JOURNAL_RECORDS, LOG_RECORDS, RETIRED_RECORDS
from .pack_remote import PackRemote
from .pull import PullStats, check_record, fetch_closure


@dataclasses.dataclass
class RepairReport:
    replaced: list[str] = dataclasses.field(default_factory=list)  # what was damaged here, now the remote's verified copy
    fetched: int = 0  # objects that were missing here, fetched
    unrepaired: list[str] = dataclasses.field(default_factory=list)  # damaged here, and no good copy on the remote: why


def repair(store: Repository, remote: PackRemote, *, workers: int = 8) -> RepairReport:
    """Objects first (a corrupt tree node hides what lies below it), then entries, records, and missing objects."""
    remote.attach(store)
    report = RepairReport()
    with ThreadPoolExecutor(workers, thread_name_prefix="agentfs-repair") as pool:
        for oid, damaged in zip(oids := list(store.db.oids()), pool.map(lambda o: _object_damaged(store, o), oids), strict=True):
            if damaged:
                _replace_object(store, remote, oid, report)
        readable: list[tuple[bytes, Entry]] = []
        for run, checkpoint_id in list(store.local_entries()):
            try:
                raw = store.local_entry(run, checkpoint_id)  # IntegrityError: no intact frame (a truncated segment)
                if raw is None:
                    continue  # removed by retention while we listed
                where = store.where_stored(run, LOG_RECORDS, checkpoint_id)
                readable.append((raw, decode_entry_at(raw, run, checkpoint_id, where, store.hasher)))
            except AgentFSError as exc:
                fixed = _replace_entry(store, remote, run, checkpoint_id, str(exc), report)
                if fixed is not None:
                    readable.append(fixed)
        for kind in (JOURNAL_RECORDS, RETIRED_RECORDS):
            for run, record_id in list(store.local_records(kind)):
                _check_local_record(store, remote, kind, run, record_id, report)
        stats = PullStats()
        try:
            fetch_closure(store, remote, pool, readable, stats)
        except AgentFSError as exc:
            report.unrepaired.append(f"missing objects: {exc}")
        report.fetched = stats.objects
    salvaged = salvage(store)  # a damaged sealed segment whose every record is now intact elsewhere is retired
    report.replaced += [f"damaged segment {path} (its records copied out of it or from the remote)" for path in salvaged.restored]
    report.unrepaired += salvaged.left
    return report


def _object_damaged(store: Repository, oid: bytes) -> bool:
    try:
        codec.decode(store.db.read_raw(oid), oid, f"local object {oid.hex()} in {store.root}", store.hasher)
    except ObjectMissing:
        return False  # deleted by gc while we listed
    except AgentFSError:
        return True
    return False


def _replace_object(store: Repository, remote: PackRemote, oid: bytes, report: RepairReport) -> None:
    where = f"object {oid.hex()}"
    try:
        blob = remote.fetch_object(oid)  # a format-2 remote checks the record's frame here
        if blob is None:
            report.unrepaired.append(f"{where}: corrupt here, and {remote.url} does not hold it")
            return
        store.db.install(oid, blob, f"remote {remote.url} {where}")  # verified before it replaces ours
    except AgentFSError as exc:
        report.unrepaired.append(f"{where}: the remote's copy does not verify either: {exc}")
        return
    report.replaced.append(where)


def _replace_entry(
    store: Repository, remote: PackRemote, run: str, checkpoint_id: str, why: str, report: RepairReport
) -> tuple[bytes, Entry] | None:
    where = f"checkpoint {run}@{checkpoint_id}"
    try:
        raw = remote.fetch_entry(run, checkpoint_id)
        if raw is None:
            report.unrepaired.append(f"{where}: {why}; {remote.url} does not hold it")
            return None
        entry = decode_entry_at(raw, run, checkpoint_id, f"remote {remote.url} {run}@{checkpoint_id}", store.hasher)
    except AgentFSError as exc:
        report.unrepaired.append(f"{where}: the remote's copy does not verify either: {exc}")
        return None
    store.install_entry(run, checkpoint_id, raw, entry, replace=True)
    report.replaced.append(where)
    return raw, entry


def _check_local_record(store: Repository, remote: PackRemote, kind: str, run: str, record_id: str, report: RepairReport) -> None:
    where = f"{kind} record {run}/{record_id}"
    try:
        local = store.read_record(run, kind, record_id)  # IntegrityError: no intact frame (a truncated segment)
        if local is None:
            return  # removed by retention while we listed
        check_record(kind, local, run, record_id, store.where_stored(run, kind, record_id))
        return
    except AgentFSError as exc:
        why = str(exc)
    try:
        data = remote.fetch_record(kind, run, record_id)
        if data is None:
            report.unrepaired.append(f"{where}: {why}; {remote.url} does not hold it")
            return
        check_record(kind, data, run, record_id, f"remote {remote.url} {run} {kind}/{record_id}")
    except AgentFSError as exc:
        report.unrepaired.append(f"{where}: the remote's copy does not verify either: {exc}")
        return
    store.repair_record(run, kind, record_id, data)
    report.replaced.append(where)
