"""verify: re-hash and cross-check everything; gc: delete unreferenced objects past a grace period."""

from __future__ import annotations

import dataclasses
import time

from ..errors import AgentFSError, FormatError, IntegrityError, NotFound, ObjectMissing
from ..format import codec
from ..format.entries import Entry
from ..format.journal import decode_record
from ..format.keys import JOURNAL, RETIRED
from ..format.refs import PACKED, Location
from ..format.retirement import decode_retirement
from ..format.walk import CHUNK, NODE, OBJECT, Children, Reached, reach
from .repository import Repository

ROLE_NAMES = {OBJECT: "object", NODE: "tree node", CHUNK: "chunk"}


@dataclasses.dataclass(frozen=True)
class Problem:
    kind: str  # corrupt | empty | missing | malformed
    where: str
    detail: str

    def __str__(self) -> str:
        return f"{self.kind}: {self.where}: {self.detail}"


@dataclasses.dataclass
class VerifyReport:
    objects: int = 0
    entries: int = 0
    problems: list[Problem] = dataclasses.field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def __bool__(self) -> bool:
        return self.ok

    def __str__(self) -> str:
        head = f"{self.objects} objects, {self.entries} checkpoints: "
        return head + ("ok" if self.ok else f"{len(self.problems)} problems\n" + "\n".join(map(str, self.problems)))


@dataclasses.dataclass
class GcReport:
    deleted: int = 0
    bytes_freed: int = 0
    kept: int = 0
    temp_deleted: int = 0
    pruned: int = 0  # checkpoints the retention policy removed first
    damaged: list[str] = dataclasses.field(default_factory=list)  # entries that could not be read: no object was deleted


def _check_object(store: Repository, oid: bytes) -> Problem | None:
    path = store.db.path(oid)
    try:
        blob = path.read_bytes()
        if not blob:
            return Problem("empty", str(path), f"object {oid.hex()} is a zero-length file")
        codec.decode(blob, oid, str(path))
    except FileNotFoundError:
        return None  # deleted by gc while we listed
    except AgentFSError as exc:
        return Problem("corrupt", str(path), str(exc))
    return None


def verify(store: Repository) -> VerifyReport:
    report = VerifyReport()
    oids = list(store.db.oids())
    report.objects = len(oids)
    good = set(oids)
    for oid, problem in zip(oids, store.pool.map(lambda o: _check_object(store, o), oids), strict=True):
        if problem is not None:
            good.discard(oid)
            report.problems.append(problem)
    partial = store.source is not None or any(store.remotes_dir.glob("*/pulled"))
    retired = _check_records(store, report)
    nodes_checked: set[bytes] = set()
    for run, checkpoint_id in store.local_entries():
        report.entries += 1
        where = f"{run}@{checkpoint_id}"
        try:
            entry = store.read_entry(run, checkpoint_id)
        except AgentFSError as exc:
            report.problems.append(Problem("malformed" if not isinstance(exc, IntegrityError) else "corrupt", where, str(exc)))
            continue
        for oid in entry.pack:
            try:
                entry.packed(oid, where)
            except AgentFSError as exc:
                report.problems.append(Problem("corrupt", where, str(exc)))
        parent = entry.manifest.parent
        if parent is not None and not partial and not store.has_entry(run, parent) and parent not in retired.get(run, ()):
            report.problems.append(Problem("missing", where, f"parent checkpoint {parent} is missing"))
        report.problems.extend(_check_refs(store, entry, (run, checkpoint_id), where, good, nodes_checked, partial))
    return report


def _check_records(store: Repository, report: VerifyReport) -> dict[str, set[str]]:
    """Check retirement and journal records; the ids retention removed on purpose, per run."""
    retired: dict[str, set[str]] = {}
    for run, record_id in store.local_records(RETIRED):
        where = f"{run} retired/{record_id}"
        try:
            data = store.read_record(run, RETIRED, record_id)
            if data is None:
                continue  # removed since it was listed
            record = decode_retirement(data, run, record_id, where)
        except (AgentFSError, OSError) as exc:
            report.problems.append(Problem("corrupt", where, str(exc)))
            continue
        retired.setdefault(run, set()).update(record.checkpoints)
    for run, record_id in store.local_records(JOURNAL):
        where = f"{run} journal/{record_id}"
        try:
            data = store.read_record(run, JOURNAL, record_id)
            if data is not None:  # else removed since it was listed (a run deleted meanwhile)
                decode_record(data, run, record_id, where)
        except (AgentFSError, OSError) as exc:
            report.problems.append(Problem("corrupt", where, str(exc)))
    return retired


def _check_refs(
    store: Repository, entry: Entry, home: Location, where: str, good: set[bytes], seen: set[bytes], partial: bool
) -> list[Problem]:
    """Problems with what `entry` needs: its borrowed packed objects, and every object file its refs reach."""
    problems: list[Problem] = []
    for label, ref in entry.refs():
        if ref[0] != PACKED:
            continue
        location = (ref[3], ref[4]) if len(ref) == 5 else home
        if location != home and partial and not store.has_entry(*location):
            continue  # not pulled yet
        try:
            store.read_packed(ref[1], location)
        except AgentFSError as exc:
            problems.append(Problem("missing", f"{where} {label}", str(exc)))

    def read_nodes(nodes: list[Reached]) -> list[Children | AgentFSError]:
        missing = ObjectMissing("is missing or corrupt")  # only nodes that re-hashed cleanly above are read
        return [store.db.read_nodes([node])[0] if node.oid in good else missing for node in nodes]

    labelled = ((f"{where} {label}", ref) for label, ref in entry.refs())
    for reached in reach(labelled, read_nodes, seen):
        what = f"{ROLE_NAMES[reached.role]} {reached.oid.hex()}"
        if isinstance(reached.error, ObjectMissing):
            if not partial:
                problems.append(Problem("missing", reached.where, f"{what} {reached.error}"))
        elif reached.error is not None:
            problems.append(Problem("malformed", reached.where, str(reached.error)))
        elif reached.role != NODE and reached.oid not in good and not partial:
            problems.append(Problem("missing", reached.where, f"{what} is missing or corrupt"))
    return problems


def _mark(store: Repository, entries: list[tuple[str, str]], marked: set[bytes]) -> list[str]:
    """Mark what `entries` reach; the entries that could not be read, each with why."""
    damaged = []
    for run, checkpoint_id in entries:
        try:
            entry = store.read_entry(run, checkpoint_id)
        except NotFound:
            continue  # pruned since it was listed
        except (FormatError, IntegrityError) as exc:
            damaged.append(f"{run}@{checkpoint_id}: {exc}")
            continue
        labelled = ((f"{run}@{checkpoint_id} {label}", ref) for label, ref in entry.refs())
        for _reached in reach(labelled, store.db.read_nodes, marked):
            pass  # reach marks as it goes; below a node that cannot be read nothing is reachable through it
    return damaged


def gc(store: Repository, grace: float = 3600.0) -> GcReport:
    """Delete objects no checkpoint references, last touched over `grace` seconds ago.

    Commits hold the store's gc lock shared from their first object write to their log entry; the
    final re-mark and the deletions happen under it exclusively, so no commit in flight loses an object.
    A log entry that cannot be read (truncated, corrupt) may need any object, so while one exists no
    object is deleted: the sweep is skipped and the entry named in `report.damaged`.
    """
    report = GcReport()
    seen = list(store.local_entries())
    marked: set[bytes] = set()
    report.damaged = _mark(store, seen, marked)
    now = time.time()
    candidates = []
    for oid in [] if report.damaged else store.db.oids():
        if oid in marked:
            report.kept += 1
            continue
        try:
            if now - store.db.path(oid).stat().st_mtime > grace:
                candidates.append(oid)
            else:
                report.kept += 1
        except FileNotFoundError:
            continue
    with store.excluding_writers():
        report.damaged += _mark(store, sorted(set(store.local_entries()) - set(seen)), marked)
        now = time.time()
        for oid in [] if report.damaged else candidates:
            path = store.db.path(oid)
            try:
                stat = path.stat()
                if oid in marked or now - stat.st_mtime <= grace:
                    report.kept += 1
                    continue
                path.unlink()
            except FileNotFoundError:
                continue
            report.deleted += 1
            report.bytes_freed += stat.st_size
        for temp in store.tmp_dir.iterdir():
            try:
                if now - temp.stat().st_mtime > grace:
                    temp.unlink()
                    report.temp_deleted += 1
            except FileNotFoundError:
                continue
    store.db.referenced.difference_update(candidates)
    return report
