"""verify: re-hash and cross-check everything; gc: compaction of sealed segments, dropping what nothing needs."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path

from ..errors import AgentFSError, FormatError, IntegrityError, NotFound, ObjectMissing, StorageError
from ..format import codec, kinds
from ..format import segment as fmt
from ..format.entries import Entry
from ..format.journal import decode_record
from ..format.keys import JOURNAL_RECORDS, RETIRED_RECORDS
from ..format.refs import EntryAddress, PackedRef
from ..format.retirement import decode_retirement
from ..format.walk import CHUNK, NODE, OBJECT, Children, Reached, reach
from ..fsutil import fsync_dir, writer_alive
from . import lineage, segments
from .index import Index
from .repository import Repository
from .segments import SealedSegment, open_indexed, open_segment, seal_copy_path, segment_ids, snapshot_path

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


def _check_object(index: Index, hasher: codec.Hasher, oid: bytes, location: segments.FrameLocation) -> Problem | None:
    where = f"object {oid.hex()} ({index.where(location)})"
    try:
        blob = index.read_body(kinds.OBJECT, oid, location, lambda body: codec.decode(body, oid, where, hasher))  # a repaired copy if any
        if not blob:
            return Problem("empty", where, f"object {oid.hex()} has an empty record")
        codec.decode(blob, oid, where, hasher)
    except NotFound:
        return None  # compacted away while we listed
    except AgentFSError as exc:
        return Problem("corrupt", where, str(exc))
    return None


def verify(store: Repository, progress: Callable[[int, int], None] | None = None) -> VerifyReport:
    """Read every segment (a fresh index: damaged batches, malformed keys), every object, entry and record, and the closures.
    `progress(done, total)`: the bytes of object records re-hashed so far, of all of them, after each object."""
    report = VerifyReport()
    index = Index(store.segments_dir, store.sealer, snapshots=False)  # every unsealed segment scanned: every damaged batch found
    try:
        index.audit()
        store.protect_sealed()  # a sealed segment an older agentfs left without a seal copy gets one
        report.problems.extend(Problem("corrupt", str(store.segments_dir), problem) for problem in index.problems)
        located = list(index.object_locations().items())
        report.objects = len(located)
        good = {oid for oid, _location in located}
        checked = store.pool.map(lambda item: _check_object(index, store.hasher, *item), located)
        total, done = sum(location.length for _oid, location in located), 0
        for (oid, location), problem in zip(located, checked, strict=True):
            if problem is not None:
                good.discard(oid)
                report.problems.append(problem)
            if progress is not None:
                done += location.length
                progress(done, total)
    finally:
        index.close()
    partial = store.source is not None or any(store.remotes_dir.glob("*/pulled"))
    retired = _check_records(store, report)
    nodes_checked: set[bytes] = set()
    parents_of: dict[str, dict[str, str | None]] = {}  # run -> id -> the parent its manifest names (LINEAGE records)
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
        parents_of.setdefault(run, {})[checkpoint_id] = parent
        if parent is not None and not partial and not store.has_entry(run, parent) and parent not in retired.get(run, ()):
            report.problems.append(Problem("missing", where, f"parent checkpoint {parent} is missing"))
        report.problems.extend(_check_refs(store, entry, (run, checkpoint_id), where, good, nodes_checked, partial))
    for run, parents in parents_of.items():
        report.problems.extend(Problem("malformed", where, detail) for where, detail in lineage.untrue(store, run, parents))
    return report


def _check_records(store: Repository, report: VerifyReport) -> dict[str, set[str]]:
    """Check retirement and journal records; the ids retention removed on purpose, per run."""
    retired: dict[str, set[str]] = {}
    for run, record_id in store.local_records(RETIRED_RECORDS):
        where = f"{run} retired/{record_id}"
        try:
            data = store.read_record(run, RETIRED_RECORDS, record_id)
            if data is None:
                continue  # removed since it was listed
            record = decode_retirement(data, run, record_id, where)
        except (AgentFSError, OSError) as exc:
            report.problems.append(Problem("corrupt", where, str(exc)))
            continue
        retired.setdefault(run, set()).update(record.checkpoints)
    for run, record_id in store.local_records(JOURNAL_RECORDS):
        where = f"{run} journal/{record_id}"
        try:
            data = store.read_record(run, JOURNAL_RECORDS, record_id)
            if data is not None:  # else removed since it was listed (a run deleted meanwhile)
                decode_record(data, run, record_id, where)
        except (AgentFSError, OSError) as exc:
            report.problems.append(Problem("corrupt", where, str(exc)))
    return retired


def _check_refs(
    store: Repository, entry: Entry, home: EntryAddress, where: str, good: set[bytes], seen: set[bytes], partial: bool
) -> list[Problem]:
    """Problems with what `entry` needs: its borrowed packed objects, and every object file its refs reach."""
    problems: list[Problem] = []
    for label, ref in entry.refs():
        if not isinstance(ref, PackedRef):
            continue
        packing = home if ref.entry is None else ref.entry
        if packing != home and partial and not store.has_entry(*packing):
            continue  # not pulled yet
        try:
            store.read_packed(ref.oid, packing)
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
    """Compaction: copy the live records of sealed segments into a new segment, then delete them.

    Runs under excluding_writers(): no commit is between choosing what to reuse and appending its
    entry, so marking from every entry sees all that is live. This process's segment and those of
    writers that died or closed are sealed first; a live writer's segment is left alone. Objects no
    entry reaches are kept while their segment was modified within `grace` seconds. Entries and
    journal records that retirement records hide are dropped; retirement and fork records are kept.
    A log entry that cannot be read may need any object: while one exists nothing is compacted.
    """
    report = GcReport()
    with store.excluding_writers():
        store.seal_for_compaction()
        marked: set[bytes] = set()
        report.damaged = _mark(store, list(store.local_entries()), marked)
        if not report.damaged:
            _compact(store, grace, marked, report)
        now = time.time()
        for temp in [*store.tmp_dir.iterdir(), *_headerless_segments(store.segments_dir)]:
            try:
                if now - temp.stat().st_mtime > grace and not (temp.parent == store.tmp_dir and writer_alive(temp)):
                    temp.unlink()
                    report.temp_deleted += 1
            except FileNotFoundError:
                continue
    return report


def _headerless_segments(directory: Path) -> list[Path]:
    """Debris of an agentfs that created segments in place: a file named like a segment, shorter than a header
    and holding only zeros, left by a crash between its creation and its header's write. Never a segment's
    data (a segment appears with its header durable); removed by gc once older than its grace."""
    found = []
    for segment_id in segment_ids(directory):
        path = directory / fmt.segment_name(segment_id)
        try:
            if path.is_file() and path.stat().st_size < fmt.HEADER.size and not path.read_bytes().strip(b"\0"):
                found.append(path)
        except FileNotFoundError:
            continue
    return found


def _compact(store: Repository, grace: float, marked: set[bytes], report: GcReport) -> None:
    now = time.time()
    victims: list[Path] = []
    kept: list[fmt.Record] = []
    copied: set[tuple[int, bytes]] = set()
    for segment_id in segment_ids(store.segments_dir):
        path = store.segments_dir / fmt.segment_name(segment_id)
        try:
            view = open_segment(path, store.index.expand)
            young = now - path.stat().st_mtime <= grace
        except (AgentFSError, FileNotFoundError):
            continue  # a segment this agentfs cannot read is never deleted by it
        if not view.sealed:
            continue  # a live writer's
        try:
            records = [
                store.index.read(segments.FrameLocation(segment_id, entry.offset, entry.length), entry.kind, _plain(store, entry))
                for entry in view.entries
            ]
        except AgentFSError as exc:
            report.damaged.append(f"{path}: {exc}: left as it is")
            continue
        live, dropped = [], []
        for record in records:
            if (record.kind, record.key) in copied or not _live(store, record, marked, young):
                dropped.append(record)  # hidden, unreferenced, or a second copy (two writers stored one object)
            else:
                copied.add((record.kind, record.key))
                live.append(record)
        if not dropped:
            continue  # nothing to reclaim: left as it is (and as old as it is, for the grace period)
        report.deleted += sum(record.kind == kinds.OBJECT for record in dropped)
        report.bytes_freed += sum(len(record.body) for record in dropped)
        kept += live
        victims.append(path)
    if victims:
        try:
            store.append_compacted(kept)  # on failure its partial output is removed: the store is as before
        except StorageError as exc:
            raise StorageError(exc.errno, f"gc (compaction, nothing deleted): {exc}") from exc
    for path in victims:
        path.unlink()
        seal_copy_path(path).unlink(missing_ok=True)
        snapshot_path(path).unlink(missing_ok=True)
    for copy in store.segments_dir.glob("*" + fmt.SEAL_COPY_SUFFIX):
        if not copy.with_suffix(fmt.SUFFIX).exists():
            copy.unlink(missing_ok=True)  # a crash between deleting a segment and its copy
    for snapshot in store.segments_dir.glob("*" + fmt.SNAPSHOT_SUFFIX):
        if not snapshot.with_suffix(fmt.SUFFIX).exists() or snapshot.with_suffix(fmt.SEAL_COPY_SUFFIX).exists():
            snapshot.unlink(missing_ok=True)  # its segment gone or sealed (a crash between the seal and its removal)
    if victims and store.sync_writes:
        fsync_dir(store.segments_dir)
    report.kept = len(store.db.oids())


def _live(store: Repository, record: fmt.Record, marked: set[bytes], young: bool) -> bool:
    if record.kind == kinds.OBJECT:
        return record.key in marked or young
    if record.kind in (kinds.ENTRY, kinds.JOURNAL):
        run, record_id = kinds.split_pair_key(record.key, "compaction")
        return store.index.has(record.kind, run, record_id)  # hidden by a retirement record: dropped
    # retirement and fork records, and kinds of a newer writer; not a LINEAGE record: a hint about the entries of the
    # segment it lies in, which the new segment holds otherwise (FORMAT.md, "Lineage records")
    return record.kind != kinds.LINEAGE


@dataclasses.dataclass
class SalvageReport:
    restored: list[str] = dataclasses.field(default_factory=list)  # damaged sealed segments whose every record now lies intact elsewhere
    left: list[str] = dataclasses.field(default_factory=list)  # damaged sealed segments kept: what no intact copy holds


def salvage(store: Repository) -> SalvageReport:
    """Retire each damaged sealed segment (one its seal copy proves sealed, truncated or damaged since) once every
    record its seal copy lists has an intact copy: its own intact records are copied out (with copies a repair
    appended, or found in other segments), then it and its seal copy are deleted. Run after a repair
    (sync/repair.py); under excluding_writers(), as compaction."""
    report = SalvageReport()
    with store.excluding_writers():
        store.refresh_index()
        for segment_id in segment_ids(store.segments_dir):
            path = store.segments_dir / fmt.segment_name(segment_id)
            try:
                opened = open_indexed(path)
            except (AgentFSError, FileNotFoundError):
                continue
            if not isinstance(opened, SealedSegment) or not opened.damage:
                continue
            records, missing = [], []
            for entry in opened.footer.entries():
                if entry.kind == kinds.LINEAGE:
                    continue  # a hint about this segment's entries, which the new segments hold otherwise
                try:
                    key = _plain(store, entry)  # appended again as records are: by plain key, sealed anew
                    if entry.kind == kinds.FORK:
                        records.append(fmt.Record(entry.kind, key, b""))  # its key is all it holds
                        continue
                    body = store.index.read_body(entry.kind, key, segments.FrameLocation(segment_id, entry.offset, entry.length))
                except AgentFSError as exc:
                    missing.append(f"{_describe(entry)} ({exc})")
                    continue
                records.append(fmt.Record(entry.kind, key, body))
            if missing:
                report.left.append(f"{path}: no intact copy of {len(missing)} of its records: {'; '.join(missing[:5])}")
                continue
            store.append_compacted(records)
            path.unlink()
            seal_copy_path(path).unlink(missing_ok=True)
            if store.sync_writes:
                fsync_dir(store.segments_dir)
            report.restored.append(str(path))
        store.index.refresh()
    return report


def _plain(store: Repository, entry: fmt.IndexEntry) -> bytes:
    """A footer's or scan's record key as the index takes it: an encrypted store's stored run names read back."""
    return entry.key if store.sealer is None else store.sealer.plain_key(entry.kind, entry.key, "a segment's record key")


def _describe(entry: fmt.IndexEntry) -> str:
    """A record for a message: an object by its oid, another record by its kind number and key."""
    if entry.kind == kinds.OBJECT:
        return f"object {entry.key.hex()}"
    key = entry.key.replace(b"\0", b"@").decode(errors="replace")
    return f"record of kind {entry.kind} {key}"
