"""verify --remote: every entry on a remote decodes, and everything it references is there."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

from ..core.maintenance import Problem, VerifyReport
from ..engine.repository import LOG
from ..errors import AgentFSError
from ..format import codec
from ..format.entries import Entry, decode_entry_at
from ..format.refs import LOOSE, PACKED, TREE, Location, parse_node
from .pull import check_record
from .remote import Remote


class _Walk:
    def __init__(self, remote: Remote, objects: set[bytes], entries: set[Location], deep: bool) -> None:
        self.remote = remote
        self.objects = objects
        self.entries = entries
        self.deep = deep
        self.checked: set[bytes] = set()
        self.lock = threading.Lock()

    def _first_time(self, oid: bytes) -> bool:
        with self.lock:
            if oid in self.checked:
                return False
            self.checked.add(oid)
            return True

    def entry(self, loc: Location) -> list[Problem]:
        where = f"{loc[0]}@{loc[1]}"
        data = self.remote.fetch_entry(*loc)
        if data is None:
            return [Problem("missing", where, "listed but vanished (a gc running?)")]
        try:
            entry = decode_entry_at(data, *loc, f"remote {where}")
            for oid in entry.pack:
                entry.packed(oid, where)
        except AgentFSError as exc:
            return [Problem("corrupt", where, str(exc))]
        return self._refs(entry, loc, where)

    def _refs(self, entry: Entry, home: Location, where: str) -> list[Problem]:
        problems: list[Problem] = []
        for label, ref in entry.refs():
            if ref[0] == PACKED and len(ref) == 5 and (ref[3], ref[4]) not in self.entries:
                problems.append(Problem("missing", f"{where} {label}", f"borrows from entry {ref[3]}@{ref[4]}, which is not on the remote"))
            elif ref[0] == LOOSE:
                problems.extend(self._object(ref[1], f"{where} {label}"))
            elif ref[0] == TREE:
                problems.extend(self._tree(ref[1], ref[3], f"{where} {label}"))
        return problems

    def _object(self, oid: bytes, where: str) -> list[Problem]:
        if oid not in self.objects:
            return [Problem("missing", where, f"object {oid.hex()} is not on the remote")]
        if not self.deep or not self._first_time(oid):
            return []
        return self._fetch(oid, where)[1]

    def _fetch(self, oid: bytes, where: str) -> tuple[bytes | None, list[Problem]]:
        blob = self.remote.fetch_object(oid)
        if blob is None:
            return None, [Problem("missing", where, f"object {oid.hex()} vanished")]
        try:
            return codec.decode(blob, oid, f"remote object {oid.hex()}"), []
        except AgentFSError as exc:
            return None, [Problem("corrupt", where, str(exc))]

    def _tree(self, oid: bytes, depth: int, where: str) -> list[Problem]:
        if oid not in self.objects:
            return [Problem("missing", where, f"tree node {oid.hex()} is not on the remote")]
        if not self._first_time(oid):
            return []
        data, problems = self._fetch(oid, where)
        if data is None:
            return problems
        try:
            children = parse_node(data, oid, where)
        except AgentFSError as exc:
            return [Problem("malformed", where, str(exc))]
        for child, _size in children:
            problems.extend(self._tree(child, depth - 1, where) if depth > 1 else self._object(child, where))
        return problems


def verify_remote(remote: Remote, *, deep: bool = False, workers: int = 16) -> VerifyReport:
    """Check every entry, journal and retirement record on `remote`; with `deep`, re-hash every object an entry uses."""
    records = remote.list_all_records()
    entries = {(run, rid) for kind, run, rid in records if kind == LOG}
    objects = set(remote.list_objects())
    report = VerifyReport(objects=len(objects), entries=len(entries))
    walk = _Walk(remote, objects, entries, deep)
    with ThreadPoolExecutor(workers, thread_name_prefix="agentfs-verify") as pool:
        for problems in pool.map(walk.entry, sorted(entries)):
            report.problems.extend(problems)
        others = [r for r in records if r[0] != LOG]
        for problem in pool.map(lambda record: _record(remote, *record), others):
            if problem is not None:
                report.problems.append(problem)
    return report


def _record(remote: Remote, kind: str, run: str, record_id: str) -> Problem | None:
    where = f"{run} {kind}/{record_id}"
    data = remote.fetch_record(kind, run, record_id)
    if data is None:
        return None  # removed by a gc since it was listed
    try:
        check_record(kind, data, run, record_id, f"remote {where}")
    except AgentFSError as exc:
        return Problem("corrupt", where, str(exc))
    return None
