"""verify: re-hash and cross-check everything; gc: delete unreferenced objects past a grace period."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from ..engine.locks import EXCLUSIVE, flock
from ..errors import AgentFSError, IntegrityError
from ..format import codec
from ..format.refs import LOOSE, PACKED, TREE, Ref
from ..objects.blobs import read_node

if TYPE_CHECKING:
    from ..engine.repository import Store


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


def _check_object(store: Store, oid: bytes) -> Problem | None:
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


def local_entries(store: Store) -> Iterator[tuple[str, str]]:
    for run in sorted(store._local_runs()):
        for checkpoint_id in store.local_ids(run):
            yield run, checkpoint_id


def verify(store: Store) -> VerifyReport:
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
    for run, checkpoint_id in local_entries(store):
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
        if parent is not None and not partial and not store.entry_path(run, parent).is_file() and parent not in retired.get(run, ()):
            report.problems.append(Problem("missing", where, f"parent checkpoint {parent} is missing"))
        for label, ref in entry.refs():
            report.problems.extend(_check_ref(store, ref, (run, checkpoint_id), f"{where} {label}", good, nodes_checked, partial))
    return report


def _check_records(store: Store, report: VerifyReport) -> dict[str, set[str]]:
    """Check retirement and journal records; the ids retention removed on purpose, per run."""
    from .journal import decode_record, journal_dir, local_journal_records
    from .retention import decode_retirement, local_retirements, retired_dir

    retired: dict[str, set[str]] = {}
    for run, record_id in local_retirements(store):
        where = f"{run} retired/{record_id}"
        try:
            record = decode_retirement((retired_dir(store, run) / record_id).read_bytes(), run, record_id, where)
        except (AgentFSError, OSError) as exc:
            report.problems.append(Problem("corrupt", where, str(exc)))
            continue
        retired.setdefault(run, set()).update(record.checkpoints)
    for run, record_id in local_journal_records(store):
        where = f"{run} journal/{record_id}"
        try:
            decode_record((journal_dir(store, run) / record_id).read_bytes(), run, record_id, where)
        except (AgentFSError, OSError) as exc:
            report.problems.append(Problem("corrupt", where, str(exc)))
    return retired


def _check_ref(
    store: Store, ref: Ref, home: tuple[str, str], where: str, good: set[bytes], nodes: set[bytes], partial: bool
) -> list[Problem]:
    kind = ref[0]
    if kind == PACKED:
        location = (ref[3], ref[4]) if len(ref) == 5 else home
        if location != home and partial and not store.entry_path(*location).is_file():
            return []  # not pulled yet
        try:
            store.read_packed(ref[1], location)
        except AgentFSError as exc:
            return [Problem("missing", where, str(exc))]
        return []
    if kind == LOOSE:
        return [] if ref[1] in good or partial else [Problem("missing", where, f"object {ref[1].hex()} is missing or corrupt")]
    if kind != TREE:
        return []
    return _check_tree(store, ref[1], ref[3], where, good, nodes, partial)


def _check_tree(store: Store, oid: bytes, depth: int, where: str, good: set[bytes], nodes: set[bytes], partial: bool) -> list[Problem]:
    if oid in nodes:
        return []
    nodes.add(oid)
    if oid not in good:
        return [] if partial else [Problem("missing", where, f"tree node {oid.hex()} is missing or corrupt")]
    problems: list[Problem] = []
    try:
        children = read_node(store.db, oid, where)
    except AgentFSError as exc:
        return [Problem("malformed", where, str(exc))]
    for child, _size in children:
        if depth > 1:
            problems.extend(_check_tree(store, child, depth - 1, where, good, nodes, partial))
        elif child not in good and not partial:
            problems.append(Problem("missing", where, f"chunk {child.hex()} is missing or corrupt"))
    return problems


def _mark(store: Store, entries: list[tuple[str, str]], marked: set[bytes]) -> None:
    for run, checkpoint_id in entries:
        entry = store.read_entry(run, checkpoint_id)  # a corrupt entry stops gc: we can't know what it needs
        for label, ref in entry.refs():
            try:
                marked.update(store.blobs.loose_oids(ref, f"{run}@{checkpoint_id} {label}", marked))
            except AgentFSError:
                continue  # a missing node: nothing below it is reachable through it


def gc(store: Store, grace: float = 3600.0) -> GcReport:
    """Delete objects no checkpoint references, last touched over `grace` seconds ago.

    Commits hold the store's gc lock shared from their first object write to their log entry; the
    final re-mark and the deletions happen under it exclusively, so no commit in flight loses an object.
    """
    report = GcReport()
    seen = list(local_entries(store))
    marked: set[bytes] = set()
    _mark(store, seen, marked)
    now = time.time()
    candidates = []
    for oid in store.db.oids():
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
    with flock(store.gc_lock_path, EXCLUSIVE):
        _mark(store, sorted(set(local_entries(store)) - set(seen)), marked)
        now = time.time()
        for oid in candidates:
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
