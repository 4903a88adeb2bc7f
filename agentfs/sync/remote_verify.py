"""verify --remote: every entry on a remote decodes, and everything it references is there."""

from __future__ import annotations

import sys
import time
from concurrent.futures import ThreadPoolExecutor

from tqdm import tqdm

from ..engine.maintenance import Problem, VerifyReport
from ..errors import AgentFSError, IntegrityError, ObjectMissing
from ..format import codec
from ..format.entries import Entry, decode_entry_at
from ..format.keys import LOG_RECORDS
from ..format.refs import EntryAddress, PackedRef, parse_node
from ..format.walk import NODE, Children, Reached, reach
from .leftovers import list_leftovers
from .pack_remote import PackRemote
from .pull import check_record


class _Walk:
    """Checks entries of a remote (concurrently: `seen` may let two threads check one object; harmless)."""

    def __init__(self, remote: PackRemote, objects: dict[bytes, int], entries: set[EntryAddress], deep: bool, bar: tqdm[None]) -> None:
        self.remote = remote
        self.objects = objects  # oid -> its frame's length on the remote
        self.bar = bar
        self.entries = entries
        self.deep = deep
        self.seen: set[bytes] = set()

    def entry(self, loc: EntryAddress) -> list[Problem]:
        where = f"{loc[0]}@{loc[1]}"
        try:
            data = self.remote.fetch_entry(*loc)
            if data is None:
                return [Problem("missing", where, "listed but vanished (a gc running?)")]
            entry = decode_entry_at(data, *loc, f"remote {where}", self.remote.hasher)
            for oid in entry.pack:
                entry.packed(oid, where)
        except AgentFSError as exc:
            return [Problem("corrupt", where, str(exc))]
        return self._refs(entry, where)

    def _refs(self, entry: Entry, where: str) -> list[Problem]:
        problems: list[Problem] = []
        for label, ref in entry.refs():
            if isinstance(ref, PackedRef) and ref.entry is not None and ref.entry not in self.entries:
                lender = "@".join(ref.entry)
                problems.append(Problem("missing", f"{where} {label}", f"borrows from entry {lender}, which is not on the remote"))
        labelled = ((f"{where} {label}", ref) for label, ref in entry.refs())
        for reached in reach(labelled, lambda nodes: [self._node(node) for node in nodes], self.seen):
            if reached.error is not None:
                problems.append(Problem(_kind(reached.error), reached.where, str(reached.error)))
            elif reached.role != NODE:
                problems.extend(self._object(reached.oid, reached.where))
        return problems

    def _object(self, oid: bytes, where: str) -> list[Problem]:
        if oid not in self.objects:
            return [Problem("missing", where, f"object {oid.hex()} is not on the remote")]
        if not self.deep:
            return []
        data = self._fetch(oid)
        return [Problem(_kind(data), where, str(data))] if isinstance(data, AgentFSError) else []

    def _fetch(self, oid: bytes) -> bytes | AgentFSError:
        self.bar.update(self.objects[oid])
        try:
            blob = self.remote.fetch_object(oid)  # a format-2 remote checks the record's frame here
            if blob is None:
                return ObjectMissing(f"object {oid.hex()} vanished")
            return codec.decode(blob, oid, f"remote object {oid.hex()}", self.remote.hasher)
        except AgentFSError as exc:
            return IntegrityError(str(exc))

    def _node(self, node: Reached) -> Children | AgentFSError:
        if node.oid not in self.objects:
            return ObjectMissing(f"tree node {node.oid.hex()} is not on the remote")
        data = self._fetch(node.oid)
        if isinstance(data, AgentFSError):
            return data
        try:
            return parse_node(data, node.oid, node.where)
        except AgentFSError as exc:
            return exc


def _kind(error: AgentFSError) -> str:
    if isinstance(error, ObjectMissing):
        return "missing"
    return "corrupt" if isinstance(error, IntegrityError) else "malformed"


def verify_remote(remote: PackRemote, *, deep: bool = False, workers: int = 16, progress: bool = False) -> VerifyReport:
    """Check every entry, journal and retirement record on `remote`; with `deep`, re-hash every object an entry uses
    (memory: each of `workers` threads holds one ranged read, at most READ_AHEAD past its object). Keys that pushes cut
    short left (packs without an index, temporary keys) are reported as leftovers: `gc --remote` collects them."""
    remote.use_keys(remote.sealer)  # an encrypted remote is read with its store's keys only (WrongKey without them)
    records = remote.list_all_records()
    entries = {(run, rid) for kind, run, rid in records if kind == LOG_RECORDS}
    objects = {oid: length for oid, (_when, length) in remote.list_objects().items()}
    report = VerifyReport(objects=len(objects), entries=len(entries))
    now = time.time()
    for leftover in list_leftovers(remote):
        report.problems.append(
            Problem(
                "leftover",
                leftover.key,
                f"{leftover.size} bytes, {max(0.0, now - leftover.modified):.0f} s old, that no index names (a push cut short, or"
                " one still running): `agentfs gc --remote` deletes it once it is older than the grace period",
            )
        )
    total = sum(objects.values()) if deep else 0
    bar = tqdm(total=total, unit="B", unit_scale=True, desc=f"verify {remote.url}", disable=not (deep and progress and sys.stderr.isatty()))
    walk = _Walk(remote, objects, entries, deep, bar)
    with bar, ThreadPoolExecutor(workers, thread_name_prefix="agentfs-verify") as pool:
        for problems in pool.map(walk.entry, sorted(entries)):
            report.problems.extend(problems)
        others = [r for r in records if r[0] != LOG_RECORDS]
        for problem in pool.map(lambda record: _record(remote, *record), others):
            if problem is not None:
                report.problems.append(problem)
    return report


def _record(remote: PackRemote, kind: str, run: str, record_id: str) -> Problem | None:
    where = f"{run} {kind}/{record_id}"
    try:
        data = remote.fetch_record(kind, run, record_id)
        if data is None:
            return None  # removed by a gc since it was listed
        check_record(kind, data, run, record_id, f"remote {where}")
    except AgentFSError as exc:
        return Problem("corrupt", where, str(exc))
    return None
