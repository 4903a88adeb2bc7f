"""The in-memory index of a store's segments: where each record lies, each run's head, the forks.

A sealed segment is read through its footer, kept and searched in place (engine/footers.py): opening
it costs its runs, retirement records and forks, not its records. An unsealed segment with an intact index
snapshot (FORMAT.md "Index snapshots") is read the same way through the snapshot's footer, and only the batches
after it are scanned; any other unsealed segment is scanned (engine/segments.py) into dicts. `refresh()` then
reads only what is new: one listing of segments/, one small pread at the known end of each unsealed segment.
A segment that vanished (compaction replaced it) makes refresh rebuild the index.

Retirement records hide the checkpoints and journal records they name, wherever they lie (format 2 never deletes a
record in place). Each run's head is kept, so `head` and `has` cost the same at 10 or 100,000 checkpoints; so are a
run's ids, sorted, once asked for (`id_slice`: a page costs the page), kept up as records are added and dropped when a
retirement or a newly opened footer touches the run (tests/engine/test_index.py::
test_id_slice_follows_sealed_segments_other_writers_an_older_id_a_copy_and_retirement). A record that cannot be
indexed (a damaged batch, a malformed key) is skipped and named in `problems`; a retirement record that does not
decode hides nothing (verify reports it). A damaged footer row raises IntegrityError naming the segment when a lookup
reads it; `audit` decodes every footer whole and scans instead each segment whose footer does not decode.

An encrypted store (`sealer`): segments hold stored run names and sealed bodies (format/crypto.py); the
index takes and returns run names and plaintext keys, and `read` authenticates a body before it returns it.
The descriptors and the reading of a frame at a location are engine/segment_files.py's (`files`); which of a
record's copies to read is the index's (`read_body`).
"""

from __future__ import annotations

import bisect
import dataclasses
import logging
import os
import threading
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

from ..errors import AgentFSError, FormatError, IntegrityError, NotFound, StorageError
from ..format import kinds
from ..format import segment as fmt
from ..format.crypto import Sealer
from ..format.retirement import decode_retirement
from .entry_log import EntryLog
from .footers import Footers
from .segment_files import SegmentFiles
from .segments import FrameLocation, SealedSegment, SnapshotSegment, batch_reader, ids_of, open_indexed, peek, scan_from, storing

log = logging.getLogger("agentfs")


T = TypeVar("T")


class IdSlice(NamedTuple):
    """Part of a run's sorted ids: `ids` are those from position `start` on, of `total`."""

    total: int
    start: int
    ids: list[str]


class SegmentLineage(NamedTuple):
    """A sealed segment's LINEAGE record for one run (format/lineage.py) and the run's entries it speaks of there."""

    location: FrameLocation
    ids: list[str]  # the run's entry ids in the segment, sorted, each once
    rows: int  # the run's entry rows in the segment (copies counted): a LINEAGE record whose `rows` differ is not used


@dataclasses.dataclass
class Known:
    """What the index has read of one segment: up to `end` (all of it once sealed)."""

    sealed: bool
    end: int


class Index:
    """Where every record of the segments in `directory` lies. Thread-safe; `refresh()` to see other writers."""

    def __init__(self, directory: Path, sealer: Sealer | None = None, *, snapshots: bool = True) -> None:
        """`snapshots`: open an unsealed segment through its index snapshot when it has an intact one (False: scan
        every unsealed segment whole, as verify does to find every damaged batch)."""
        self.directory = directory
        self.sealer = sealer
        self.snapshots = snapshots
        self.expand = None if sealer is None else sealer.group_members  # opens an encrypted store's groups as scans meet them
        self._directory = os.fspath(directory)
        # the last listing of the directory, its segment ids and their set
        self._listed: tuple[list[str], list[int], frozenset[int]] = ([], [], frozenset())
        self._lock = threading.RLock()
        self.files = SegmentFiles(directory, sealer)
        self._valid_runs: set[str] = set()  # run names of indexed keys, found valid once
        self.generation = 0  # grows at every rebuild: locations from before it may be gone
        self.entry_log = EntryLog()  # what it adds, for watchers
        self._clear()
        self.refresh()

    def _clear(self) -> None:
        self.footers = Footers(self.sealer)  # sealed segments, searched in place (and unsealed ones' index snapshots)
        self.snapshotted: set[int] = set()  # unsealed segments whose footer here is their index snapshot's, not a seal's
        # unsealed segments' records (and those of segments sealed since this index first read them)
        self.objects: dict[bytes, FrameLocation] = {}
        self.copies: dict[tuple[int, bytes], list[FrameLocation]] = {}  # further copies of a key (dedup races, repairs)
        self.records: dict[int, dict[str, dict[str, FrameLocation]]] = {kind: {} for kind in kinds.RUN_KINDS}
        self.heads: dict[str, str] = {}
        self.hidden: dict[str, set[str]] = {}  # run -> checkpoint and journal ids its retirement records name
        self.forks: dict[str, set[str]] = {}
        self.lineage: dict[str, dict[int, list[FrameLocation]]] = {}  # run -> segment id -> its LINEAGE records there
        # (kind, run) -> the run's ids, sorted, made by the first `ids` call and kept up as records are added
        self._sorted: dict[tuple[int, str], list[str]] = {}
        self.segments: dict[int, Known] = {}
        self.problems: list[str] = []
        self.version = 0  # grows whenever a record is added or hidden

    def close(self) -> None:
        """Close the descriptors kept open (SegmentFiles.close)."""
        self.files.close()

    # keeping up with the segments

    def refresh(self, own: int | None = None) -> None:
        """Index what other writers appended since the last look; rebuild if a segment vanished.

        `own`: the segment this process's writer appends to now, whose tail is not read. Only this
        process appends to it (it holds the segment's writer slot), what others appended there before it took
        the slot was read when it took it (SegmentStore._segment_writer), and each of its appends indexes
        its batch (add_batch) before the append returns: a batch of another thread's append still
        under way is left out, as it would be had that append started a moment later."""
        with self._lock:
            present, present_set = self._present()
            if not self.segments.keys() <= present_set:
                self.rebuild(present)
                return
            for segment_id, known in self.segments.items():
                if not known.sealed and segment_id != own:
                    with storing("reading segment", self._where(segment_id)):
                        self._read_tail(segment_id, known)
            if len(present) != len(self.segments):
                for segment_id in present:
                    if segment_id not in self.segments:
                        self._open(segment_id)

    def _present(self) -> tuple[list[int], frozenset[int]]:
        """The ids of the segments in the directory now, oldest first, and as a set (made only when the listing changed).

        One listdir per refresh, so per commit: a new segment (another writer's first, a roll-over, a compaction's)
        holds records a commit must see, and only a listing finds it for sure. A stat of segments/ (its mtime)
        would cost half as much but misses a segment made within the timestamp granularity of the last look
        (coarse timestamps: a clock tick), or after the clock stepped back; inotify would need a watch kept by
        every process that commits."""
        try:
            names = os.listdir(self._directory)
        except FileNotFoundError:
            names = []
        if names != self._listed[0]:
            ids = ids_of(names)
            self._listed = (names, ids, frozenset(ids))
        return self._listed[1], self._listed[2]

    def listed_names(self) -> frozenset[str]:
        """The names in the segments directory at the last look (_present): segments, seal copies, debris."""
        return frozenset(self._listed[0])

    def rebuild(self, present: list[int] | None = None) -> None:
        with self._lock:
            self.close()
            self._clear()
            self.generation += 1
            self.entry_log.reset()
            for segment_id in self._present()[0] if present is None else present:
                self._open(segment_id)

    def _path(self, segment_id: int) -> Path:
        return self.files.path(segment_id)

    def _where(self, segment_id: int) -> str:
        return self.files.name(segment_id)

    def _open(self, segment_id: int) -> None:
        try:
            opened = open_indexed(self._path(segment_id), self.expand, snapshots=self.snapshots)
        except FileNotFoundError:
            return  # compacted away since it was listed
        except OSError as exc:  # EIO: raised, never a segment skipped (a run silently shorter)
            raise StorageError(exc.errno, f"opening segment {self._path(segment_id)}: {exc.strerror or exc}") from exc
        except AgentFSError as exc:
            self.problems.append(str(exc))
            return
        if isinstance(opened, SealedSegment):
            if opened.damage:  # never a silently shorter run: its lost records stay indexed, and fail when read
                self.problems.append(opened.damage)
                log.warning("%s", opened.damage)
            self.segments[segment_id] = Known(True, opened.end)
            try:
                self._add_footer(segment_id, opened.footer)
            except (IntegrityError, FormatError) as exc:  # a damaged row among those read at open; a run name no key of ours made
                self._scan_instead(segment_id, exc)
            return
        if isinstance(opened, SnapshotSegment):
            self.snapshotted.add(segment_id)
            try:
                self._add_footer(segment_id, opened.footer)
            except (IntegrityError, FormatError) as exc:  # a row its checksum covers that no writer of ours makes
                self._scan_instead(segment_id, exc)
                self.segments[segment_id] = Known(False, opened.tail.end)
                return
            opened = opened.tail
        self.problems.extend(opened.problems)
        self.segments[segment_id] = Known(opened.sealed, opened.end)
        self._add(segment_id, opened.entries)

    def _add_footer(self, segment_id: int, footer: fmt.Footer) -> None:
        """Index a sealed segment by its footer: its heads, forks and retirement records; its rows stay where they are."""
        names = {stored: self._run_name(stored, segment_id) for _kind, stored in footer.runs}
        retirements = [(names[run], row) for kind, run in footer.runs if kind == kinds.RETIRED for row in footer.rows(kind, run)]
        heads = {names[run]: footer.newest(kind, run, self.hidden.get(names[run], ())) for kind, run in footer.runs if kind == kinds.ENTRY}
        self.footers[segment_id] = footer
        for kind, run in footer.runs:
            self._sorted.pop((kind, names[run]), None)
        if self.sealer is None:
            self.entry_log.add(footer)
        elif self.entry_log.followed:  # a footer names runs by stored names: watchers get the names
            for kind, run in footer.runs:
                for record_id in footer.ids(kind, run) if kind == kinds.ENTRY else ():
                    self.entry_log.add((names[run], record_id))
        for run, newest in heads.items():
            if newest is not None and newest > self.heads.get(run, ""):
                self.heads[run] = newest
        self._add(segment_id, footer.others)
        for run, (record_id, offset, length) in retirements:
            self._hide(run, record_id, FrameLocation(segment_id, offset, length))

    def _run_name(self, stored: str, segment_id: int) -> str:
        return stored if self.sealer is None else self.sealer.run_name(stored, self._where(segment_id))

    def _read_tail(self, segment_id: int, known: Known) -> None:
        """Batches appended after `known.end`: one small pread when there are none."""
        fd = self.files.fd(segment_id)
        if fd is None:
            return
        head = os.pread(fd, fmt.BEGIN_FRAME, known.end)
        if not head.strip(b"\0"):  # the preallocated zeros, or the end of the file: nothing new
            return
        if fmt.batch_length(head, segment_id, known.end) is None:  # a torn tail or a footer: nothing new
            if head[fmt.FRAME.size - 1 : fmt.FRAME.size] == bytes([fmt.KIND_FOOTER]):
                known.sealed = peek(self._path(segment_id))[1]
            return
        entries: list[fmt.IndexEntry] = []
        size = os.fstat(fd).st_size
        while (length := fmt.batch_length(head, segment_id, known.end)) is not None:
            try:
                if known.end + length > size:
                    raise IntegrityError(f"{self._where(segment_id)} offset {known.end}: a batch claims {length} bytes past the file's end")
                read = batch_reader(fd, size, known.end, length)  # a large batch is read a frame at a time, never whole
                entries.extend(fmt.decode_batch(read, segment_id, known.end, self._where(segment_id), self.expand, length=length))
            except AgentFSError:  # damaged or still being written: the full scan tells which
                view = scan_from(self._path(segment_id), known.end, self.expand)
                self.problems.extend(view.problems)
                entries.extend(view.entries)
                known.end = view.end
                break
            known.end += length
            head = os.pread(fd, fmt.BEGIN_FRAME, known.end)
        self._add(segment_id, entries)

    def add_batch(self, segment_id: int, start: int, end: int, entries: Iterable[fmt.IndexEntry]) -> None:
        """Index a batch this process appended at `start`..`end` of its own segment, without reading it back; the
        entries' keys plain, as the records were before sealing (an encrypted store's are not read back from stored names)."""
        with self._lock:
            known = self.segments.get(segment_id)
            if known is None and start == fmt.HEADER.size:
                known = self.segments[segment_id] = Known(False, start)
            if known is not None and known.end == start:
                known.end = end
            self._add(segment_id, entries, plain=True)

    def _add(self, segment_id: int, entries: Iterable[fmt.IndexEntry], plain: bool = False) -> None:
        """Index `entries` of segment `segment_id`, their keys as stored (an encrypted store's name runs by stored names)
        unless `plain`."""
        sealer = None if plain else self.sealer
        retirements = []
        path = self._where(segment_id)
        for entry in entries:
            location = FrameLocation(segment_id, entry.offset, entry.length)
            where = f"{path} offset {entry.offset}"
            try:
                if entry.kind == kinds.OBJECT:
                    self._add_object(kinds.check_object_key(entry.key, where), location)
                elif entry.kind in kinds.RUN_KINDS:
                    key = entry.key if sealer is None else sealer.plain_key(entry.kind, entry.key, where)
                    run, record_id = kinds.split_run_key(key, where, checked=self._valid_runs)
                    if entry.kind == kinds.RETIRED:
                        retirements.append((run, record_id, location))
                    self._add_run_record(entry.kind, run, record_id, location)
                elif entry.kind == kinds.FORK:
                    key = entry.key if sealer is None else sealer.plain_key(entry.kind, entry.key, where)
                    source, target = kinds.split_run_key(key, where, second="run")
                    self.forks.setdefault(source, set()).add(target)
                elif entry.kind == kinds.LINEAGE:
                    key = entry.key if sealer is None else sealer.plain_key(entry.kind, entry.key, where)
                    run, _record_id = kinds.split_run_key(key, where, checked=self._valid_runs)
                    self.lineage.setdefault(run, {}).setdefault(segment_id, []).append(location)
                # other kinds: a newer writer's; this reader skips them
            except AgentFSError as exc:
                self.problems.append(str(exc))
        for run, record_id, location in retirements:
            self._hide(run, record_id, location)
        self.version += 1

    def _add_object(self, oid: bytes, location: FrameLocation) -> None:
        first = self.objects.setdefault(oid, location)
        if first != location:
            self.copies.setdefault((kinds.OBJECT, oid), []).append(location)

    def _add_run_record(self, kind: int, run: str, record_id: str, location: FrameLocation) -> None:
        if kind != kinds.RETIRED and record_id in self.hidden.get(run, ()):
            return
        by_id = self.records[kind].setdefault(run, {})
        first = by_id.setdefault(record_id, location)
        if first != location:
            self.copies.setdefault((kind, kinds.pair_key(run, record_id)), []).append(location)
        else:
            self._keep_sorted(kind, run, record_id)
        if kind == kinds.ENTRY:
            if first == location:
                self.entry_log.add((run, record_id))
            if record_id > self.heads.get(run, ""):
                self.heads[run] = record_id

    def _keep_sorted(self, kind: int, run: str, record_id: str) -> None:
        """Add a newly indexed id to the run's kept sorted ids: appended when it is the greatest (a commit), else
        inserted in place unless a footer already holds it (a pull's older id, a copy)."""
        kept = self._sorted.get((kind, run))
        if kept is None:
            return
        if not kept or record_id > kept[-1]:
            kept.append(record_id)
            return
        at = bisect.bisect_left(kept, record_id)
        if at == len(kept) or kept[at] != record_id:
            kept.insert(at, record_id)

    def _hide(self, run: str, record_id: str, location: FrameLocation) -> None:
        """Apply a retirement record: what it names leaves the index (and stays out if indexed later)."""
        where = f"{run} retired/{record_id} ({self._where(location.segment_id)} offset {location.offset})"
        try:
            record = decode_retirement(self.read(location, kinds.RETIRED, kinds.pair_key(run, record_id)).body, run, record_id, where)
        except AgentFSError:
            return  # hides nothing; verify reports the record
        named = set(record.checkpoints) | set(record.journal)
        self.hidden.setdefault(run, set()).update(named)
        for kind in (kinds.ENTRY, kinds.JOURNAL):
            self._sorted.pop((kind, run), None)
        for kind in (kinds.ENTRY, kinds.JOURNAL):
            by_id = self.records[kind].get(run, {})
            for gone in named & by_id.keys():
                del by_id[gone]
            if not by_id:
                self.records[kind].pop(run, None)
        if self.heads.get(run) in named:
            newest = self._newest(kinds.ENTRY, run)
            if newest is None:
                del self.heads[run]
            else:
                self.heads[run] = newest

    def _newest(self, kind: int, run: str) -> str | None:
        """The greatest id of the run's records of `kind` that no retirement hides."""
        found = [self.footers.newest(kind, run, self.hidden.get(run, set()) if kind != kinds.RETIRED else ())]
        if self.records[kind].get(run):
            found.append(max(self.records[kind][run]))
        return max((newest for newest in found if newest is not None), default=None)

    def _hides(self, kind: int, run: str, record_id: str) -> bool:
        return kind != kinds.RETIRED and record_id in self.hidden.get(run, ())

    def audit(self) -> None:
        """Decode every footer whole (verify): a segment whose footer has a damaged row is reported and scanned instead."""
        with self._lock:
            for segment_id, footer in list(self.footers.items()):
                try:
                    footer.entries()
                except AgentFSError as exc:
                    self._scan_instead(segment_id, exc)

    def _scan_instead(self, segment_id: int, damage: AgentFSError) -> None:
        self.problems.append(f"{damage}; scanning the segment instead")
        self.footers.pop(segment_id, None)
        self.snapshotted.discard(segment_id)
        self._sorted.clear()
        view = scan_from(self._path(segment_id), fmt.HEADER.size, self.expand)
        self.problems.extend(view.problems)
        self._add(segment_id, view.entries)
        self.heads = {run: head for run in self.heads if (head := self._newest(kinds.ENTRY, run)) is not None}

    # lookups (call refresh() first to see other writers' records)

    def has(self, kind: int, run: str, record_id: str) -> bool:
        return self.location(kind, run, record_id) is not None

    def location(self, kind: int, run: str, record_id: str) -> FrameLocation | None:
        with self._lock:
            if self._hides(kind, run, record_id):
                return None
            found = self.records[kind].get(run, {}).get(record_id)
            return found if found is not None else self.footers.first_record(kind, run, record_id)

    def locations(self, kind: int, run: str) -> dict[str, FrameLocation]:
        """Where each of the run's records of `kind` lies, as `location` finds it: for a sweep over the whole run, which
        then costs no search per record."""
        with self._lock:
            found = self.footers.locations(kind, run)
            found.update(self.records[kind].get(run, {}))
            hidden = self.hidden.get(run) if kind != kinds.RETIRED else None
            return found if not hidden else {record_id: at for record_id, at in found.items() if record_id not in hidden}

    def ids(self, kind: int, run: str) -> list[str]:
        """The run's ids of `kind`, oldest first (a copy of the kept sorted list)."""
        with self._lock:
            return list(self._sorted_ids(kind, run))

    def id_slice(self, kind: int, run: str, start: int | None = None, stop: int | None = None) -> IdSlice:
        """The run's ids of `kind` from `start` to `stop` (as a slice of `ids()`, negative from the newest) and
        how many there are: the cost of the slice, not of the run, once the run's ids were sorted (first call)."""
        with self._lock:
            kept = self._sorted_ids(kind, run)
            first, last, _step = slice(start, stop).indices(len(kept))
            return IdSlice(len(kept), first, kept[first:last])

    def _sorted_ids(self, kind: int, run: str) -> list[str]:
        kept = self._sorted.get((kind, run))
        if kept is None:
            parts = self.footers.ids(kind, run)
            if run in self.records[kind]:
                parts.append(list(self.records[kind][run]))
            ids = parts[0] if len(parts) == 1 else list(set().union(*parts))
            hidden = self.hidden.get(run) if kind != kinds.RETIRED else None
            # a footer's ids are sorted: timsort's linear case
            kept = self._sorted[kind, run] = sorted(ids if not hidden else (i for i in ids if i not in hidden))
        return kept

    def runs(self, kind: int) -> list[str]:
        with self._lock:
            runs = self.footers.runs(kind) | set(self.records[kind])
            return sorted(run for run in runs if run in self.records[kind] or self._newest(kind, run) is not None)

    def all_ids(self, kind: int) -> Iterator[tuple[str, str]]:
        """(run, id) of every record of `kind`, run by run, oldest first."""
        for run in self.runs(kind):
            for record_id in self.ids(kind, run):
                yield run, record_id

    def lineages(self, run: str) -> list[SegmentLineage]:
        """The run's LINEAGE records that may be used: one per sealed segment, in a segment holding entries of the run
        (a segment with two, or one that was scanned instead of read by its footer, is left out)."""
        with self._lock:
            found = []
            for segment_id, locations in self.lineage.get(run, {}).items():
                usable = len(locations) == 1 and segment_id not in self.snapshotted  # a snapshot lists only some of its entries
                entries = self.footers.entry_rows(segment_id, run) if usable else None
                if entries is not None:
                    found.append(SegmentLineage(locations[0], *entries))
            return found

    def head(self, run: str) -> str | None:
        with self._lock:
            return self.heads.get(run)

    def object_location(self, oid: bytes) -> FrameLocation | None:
        with self._lock:
            found = self.objects.get(oid)
            return found if found is not None else self.footers.first_object(oid)

    def objects_located(self, oids: list[bytes]) -> list[FrameLocation | None]:
        """object_location() of each of `oids`, under one hold of the lock."""
        with self._lock:
            return [self.objects.get(oid) or self.footers.first_object(oid) for oid in oids]

    def object_locations(self) -> dict[bytes, FrameLocation]:
        """Every object and where its first copy lies (all of every footer decoded)."""
        with self._lock:
            return self.objects | {oid: location for oid, location in self.footers.object_locations().items() if oid not in self.objects}

    def object_ids(self) -> list[bytes]:
        return list(self.object_locations())

    def object_lengths(self) -> list[int]:
        """The length of each object's blob (its record's body). Objects that lie in one GROUP record (an encrypted
        store's) share its frame: its bytes are counted once, on the first of them, 0 on the others."""
        overhead = fmt.record_overhead(kinds.OID_LENGTH)
        seen: set[FrameLocation] = set()
        lengths = []
        for location in self.object_locations().values():
            lengths.append(0 if location in seen else location.length - overhead)
            seen.add(location)
        return lengths

    def rows_read(self) -> int:
        """Footer rows decoded so far: what this index's lookups cost in sealed segments."""
        with self._lock:
            return self.footers.rows_read()

    def sealed_ids(self) -> list[int]:
        """The segments indexed through their footers (sealed), oldest first."""
        with self._lock:
            return [segment_id for segment_id in self.footers if segment_id not in self.snapshotted]

    def known_end(self, segment_id: int) -> int:
        with self._lock:
            known = self.segments.get(segment_id)
            return 0 if known is None else known.end

    # reading (the descriptors and the frame checks are SegmentFiles'; which copy to read is the index's)

    def use(self, segment_id: int, operation: str, action: Callable[..., T], *args: Any) -> T:
        return self.files.use(segment_id, operation, action, *args)

    def pread(self, segment_id: int, length: int, offset: int) -> bytes:
        return self.files.pread(segment_id, length, offset)

    def read(self, location: FrameLocation, kind: int | None = None, key: bytes | None = None) -> fmt.Record:
        return self.files.read(location, kind, key)

    def read_body(self, kind: int, key: bytes, first: FrameLocation, check: Callable[[bytes], object] | None = None) -> bytes:
        """The body of the record `key` whose first copy lies at `first`, and where it lies now if its
        segment was compacted away since. With several copies (one appended to repair another), the
        first whose frame is intact and that `check` accepts; if none, the first intact one (the
        caller's check then reports the damage), else the first frame's IntegrityError."""
        try:
            return self._read_copies(kind, key, first, check)
        except NotFound:
            self.refresh()
            moved = self._find(kind, key)
            if moved is None:
                raise
            return self._read_copies(kind, key, moved, check)

    def _find(self, kind: int, key: bytes) -> FrameLocation | None:
        if kind == kinds.OBJECT:
            return self.object_location(key)
        run, record_id = kinds.split_pair_key(key, "lookup")
        return self.location(kind, run, record_id)

    def _copies(self, kind: int, key: bytes) -> list[FrameLocation]:
        """Every location of the record `key`: in the unsealed segments, then in every footer."""
        with self._lock:
            if kind == kinds.OBJECT:
                first, sealed = self.objects.get(key), self.footers.objects(key)
            else:
                run, record_id = kinds.split_pair_key(key, "lookup")
                first, sealed = self.records[kind].get(run, {}).get(record_id), self.footers.records(kind, run, record_id)
            return ([] if first is None else [first, *self.copies.get((kind, key), ())]) + sealed

    def _read_copies(self, kind: int, key: bytes, first: FrameLocation, check: Callable[[bytes], object] | None) -> bytes:
        others = [location for location in self._copies(kind, key) if location != first]
        damage: IntegrityError | None = None
        intact: bytes | None = None
        for location in [first, *others]:
            try:
                record = self.read(location, kind, key)
            except IntegrityError as exc:
                damage = damage or exc
                continue
            if record.kind != kind or record.key != key:
                continue
            if check is None or not others:
                return record.body
            try:
                check(record.body)
            except AgentFSError:
                intact = record.body if intact is None else intact
                continue
            return record.body
        if intact is not None:
            return intact
        if damage is not None:
            raise damage
        raise IntegrityError(f"{self._path(first.segment_id)} offset {first.offset}: holds another record than {key[:80]!r}")

    def where(self, location: FrameLocation) -> str:
        return self.files.where(location)
