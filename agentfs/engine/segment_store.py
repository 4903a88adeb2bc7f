"""The segment side of a Repository: the index, this process's segment writer, durability of reuse, locks.

Repository (engine/repository.py) adds entries, records, retention, forks and config on top; the
engine API is listed there.
"""

from __future__ import annotations

import functools
import logging
import os
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from pathlib import Path

from ..errors import StoreClosed
from ..format import codec, keys, kinds
from ..format import segment as fmt
from ..format.crypto import Sealer
from ..format.lineage import EntryParent
from ..format.refs import EntryAddress
from ..fsutil import fsync_dir
from . import segments
from .index import Index
from .locks import EXCLUSIVE, SHARED, LockFiles, forks
from .record_groups import seal_batch
from .sealing import protect_sealed
from .segment_writer import SEAL_AT, Durability, SegmentWriter, seal_orphans

COMPACTION_BATCH = 1024  # records per batch when compaction copies live records
log = logging.getLogger("agentfs")


class SegmentStore:
    """The segments of the store at `root`: where records lie, and appending durably to them."""

    def __init__(self, root: Path, durability: Durability, sealer: Sealer | None = None, *, group_records: bool = False) -> None:
        self.root = root
        self.sealer = sealer  # an encrypted store's keys: records are sealed as they are appended, opened by the index
        # an encrypted store of encryption format 2 seals a batch's small records together (record_groups.py)
        self.group_records = sealer is not None and group_records
        self.durability = durability
        self.sync_writes = durability == "power"
        self.segments_dir = root / keys.SEGMENTS
        self.locks_dir = root / keys.LOCKS
        self.tmp_dir = root / keys.TMP
        self.remotes_dir = root / keys.REMOTES
        self.index = Index(self.segments_dir, sealer)
        self.hasher: codec.Hasher = codec.hash_bytes if sealer is None else sealer.object_id  # makes object ids
        self._locks_path = os.fspath(self.locks_dir)
        self._gc_lock_path = os.path.join(root, *keys.GC_LOCK)
        self._writer: SegmentWriter | None = None
        self._writer_forks = 0  # locks.forks() when the writer was made
        self._synced: dict[int, int] = {}  # segment id -> offset up to which this process knows it durable
        self._lock = threading.Lock()
        self._held = threading.local()  # the stripe locks this thread holds: appending() nests
        self._lock_files = LockFiles()  # locks/ descriptors kept open: a commit opens no file for its locks
        self._gate = threading.Condition()  # counts the writes in flight (writing(), excluding_writers()) for close
        self._in_flight = 0
        self._closed = False
        self._inside = threading.local()  # depth: the writes in flight on this thread
        self.protect_sealed()

    def protect_sealed(self) -> None:
        """Write the missing seal copy of each sealed segment (sealing.protect_sealed); a store this process
        cannot write to is read as it is."""
        try:
            for path in protect_sealed(self.segments_dir, self.index.sealed_ids(), self.index.listed_names(), sync=self.sync_writes):
                log.info("%s: sealed without a seal copy (an older agentfs, or a crash after its seal): copy written", path)
        except OSError as exc:  # StorageError too: a read-only store, a full disk
            log.warning("%s: could not write the seal copies of older sealed segments: %s", self.segments_dir, exc)

    def stop_writes(self) -> None:
        """Refuse new writes (StoreClosed) and wait for those in flight to finish, with no lock held.

        Hazard: close() used to wait for the pool while holding the store's lock, which a pool thread of an
        in-flight commit (making a reused record durable) waited for: a deadlock. Waiting here holds nothing
        another thread needs; a write of this thread itself (close from inside a commit) is not waited for
        (tests/engine/test_segment_faults.py, close during a commit).

        Hazard: a closing thread that holds a lock (a run's or journal's stripe, the gc lock) would wait for a
        commit in flight that waits for that lock: a deadlock. Then waiters for the store's locks are told to
        give up first (StoreClosed; LockFiles.interrupt), so the commits in flight end (tests/
        tests/engine/test_close_from_any_thread.py); else they finish."""
        own = getattr(self._inside, "depth", 0)
        if own or getattr(self._held, "paths", None):
            self._lock_files.interrupt()
        with self._gate:
            self._closed = True
            self._gate.wait_for(lambda: self._in_flight <= own)

    def _check_open(self) -> None:
        if self._closed:
            raise StoreClosed(f"the agentfs store {self.root} is closed")

    def close_segments(self) -> None:
        self.stop_writes()
        self._leave_parents_writer()
        try:
            with self._lock:
                writer, self._writer = self._writer, None
                if writer is not None:
                    try:
                        if writer.position >= SEAL_AT and writer.current_segment() is not None:
                            writer.seal()  # the next open reads its footer instead of scanning its batches
                    finally:
                        writer.close()  # an unsealed segment is left for the slot's next writer to continue
        finally:
            self.index.close()
            self._lock_files.close()

    # appending and durability

    def _segment_writer(self) -> SegmentWriter:
        writer = self._writer  # once made, kept until close: the lock only guards making it
        if writer is not None and self._writer_forks == forks():
            return writer
        self._leave_parents_writer()
        with self._lock:
            self._check_open()
            if self._writer is None:
                writer = SegmentWriter(
                    self.segments_dir, self.locks_dir, durability=self.durability, expand=self.index.expand, stored=self.sealed
                )
                # Hazard: the writer may adopt a segment that another process (the slot's last holder) appended to
                # after this index last read it, and refresh_index never reads the tail of the writer's own segment.
                # Unread, those records were lost to this process: a commit's parent= check under the run lock saw
                # a stale head and appended over it, so two commits shared a parent and the newer head lacked the
                # other's changes (tests/engine/test_concurrent_writers.py, adopted segment). So the tail is read once here,
                # before the writer is published: until then refresh_index takes no segment as this process's own.
                try:
                    self.index.refresh()
                except BaseException:
                    writer.close()
                    raise
                self._writer, self._writer_forks = writer, forks()
            return self._writer

    def _leave_parents_writer(self) -> None:
        """In a child forked after this store wrote, drop the writer inherited from the parent: it holds the
        parent's slot and appends at the parent's offsets, so parent and child would overwrite each other's
        batches (tests/engine/test_concurrent_writers.py, fork). The child takes a slot of its own at its first append."""
        if self._writer is not None and self._writer_forks != forks():
            self._writer.abandon()
            self._lock = threading.Lock()  # a parent's thread may have held it at the fork
            self._writer = None
            self._synced.clear()  # what the parent knew synced: the child learns it again

    def _append(self, records: Sequence[fmt.Record], sync: bool) -> list[segments.FrameLocation]:
        """Append `records` as one batch to this process's segment (fdatasynced if `sync`) and index them; where they lie."""
        segment_id, entries = self._append_batch(records, sync)
        return [segments.FrameLocation(segment_id, entry.offset, entry.length) for entry in entries]

    def _append_batch(
        self, records: Sequence[fmt.Record], sync: bool, parents: Mapping[bytes, EntryParent] | None = None
    ) -> tuple[int, list[fmt.IndexEntry]]:
        """_append, for a caller that needs no FrameLocation: (the segment's id, the records' index entries). `parents`:
        the run and parent of ENTRY records among them, by plain key (for the seal's LINEAGE records)."""
        if parents and self.sealer is not None:
            parents = {self.sealer.stored_key(kinds.ENTRY, key): parent for key, parent in parents.items()}
        if self.group_records and self.sealer is not None:
            frames, placed = seal_batch(self.sealer, records)
            segment_id, start, end, entries = self._segment_writer().append_batch(frames, sync=sync, placed=placed, parents=parents)
        else:
            segment_id, start, end, entries = self._segment_writer().append_batch(self.sealed(records), sync=sync, parents=parents)
        plain = entries
        if self.sealer is not None:  # the index takes plain keys: each entry's record, in `records`' order
            plain = [fmt.IndexEntry(r.kind, r.key, e.offset, e.length) for r, e in zip(records, entries, strict=True)]
        self.index.add_batch(segment_id, start, end, plain)
        if sync and self.sync_writes:
            with self._lock:
                self._synced[segment_id] = max(self._synced.get(segment_id, 0), end)
        return segment_id, entries

    def sealed(self, records: Sequence[fmt.Record]) -> Sequence[fmt.Frame]:
        """`records` as packs (and segments of encryption format 1) hold them: in an encrypted store each key as
        stored and each body sealed under it (format/crypto.py); else unchanged."""
        sealer = self.sealer
        if sealer is None:
            return records
        stored = [sealer.stored_key(record.kind, record.key) for record in records]
        return [fmt.SealedRecord(r.kind, key, sealer.seal(r.kind, key, r.body)) for r, key in zip(records, stored, strict=True)]

    def refresh_index(self) -> None:
        """Index other writers' new records (Index.refresh), reading no tail of this process's current segment."""
        writer = self._writer  # a forked child's is its parent's, which appends there still: read that tail
        own = writer.current_segment() if writer is not None and self._writer_forks == forks() else None
        self.index.refresh(own=own)

    def make_durable(self, location: segments.FrameLocation) -> None:
        """Make the record at `location` durable before this process reuses it (DESIGN.md invariant 1).

        Hazard: another writer (or a process killed before its sync, or one with durability
        "process") may have appended it without an fdatasync, or made its segment's directory entry
        without an fsync. The first time a segment is relied on it is fsynced with segments/; later
        only an fdatasync, and none for what this process already knows synced. Records in this
        process's own current segment need nothing: its own next append's fdatasync covers the file.
        """
        if not self.sync_writes:
            return
        segment_id, end = location.segment_id, location.offset + location.length
        writer = self._writer
        if writer is not None and writer.segment_id == segment_id:
            return
        with self._lock:
            synced = self._synced.get(segment_id)
        if synced is not None and synced >= end:
            return
        known = max(end, self.index.known_end(segment_id))  # read before the sync: all of it is covered
        if synced is None:
            self.index.use(segment_id, "syncing segment", os.fsync)
            fsync_dir(self.segments_dir)
        else:
            self.index.use(segment_id, "syncing segment", os.fdatasync)
        with self._lock:
            self._synced[segment_id] = max(self._synced.get(segment_id, 0), known)

    # compaction (engine/maintenance.py), under excluding_writers()

    def seal_for_compaction(self) -> None:
        """Seal this process's segment and those no live writer holds, so that compaction may copy them."""
        if self._writer is not None:
            self._writer.seal()
        seal_orphans(self.segments_dir, self.locks_dir, durability=self.durability, expand=self.index.expand)
        self.index.refresh()

    def append_compacted(self, records: Sequence[fmt.Record]) -> None:
        """Append copies of live records to new segments of this process, sealed (so synced) at the end.

        Hazard: a compaction that fails midway (ENOSPC, EIO) would leave its partial output, holding the
        space the store needs to go on. Every segment it made is removed before the error propagates, so
        the store is as before (tests/engine/test_disk_full.py, tests/engine/test_segment_faults.py)."""
        writer = self._segment_writer()
        made = len(writer.created)
        try:
            for start in range(0, len(records), COMPACTION_BATCH):
                self._append(records[start : start + COMPACTION_BATCH], False)
            writer.seal()
        except BaseException:
            writer.discard(writer.created[made:])
            self.index.refresh()
            raise

    def local_runs(self) -> list[str]:
        """Names of the runs with at least one entry in this store."""
        self.index.refresh()
        return self.index.runs(kinds.ENTRY)

    def local_ids(self, run: str) -> list[str]:
        """The ids of `run`'s entries in this store, oldest first."""
        self.index.refresh()
        return self.index.ids(kinds.ENTRY, run)

    def local_entries(self) -> Iterator[EntryAddress]:
        """(run, id) of every entry in the store, run by run."""
        self.index.refresh()
        return self.index.all_ids(kinds.ENTRY)

    def _location(self, kind: int, run: str, record_id: str) -> segments.FrameLocation | None:
        location = self.index.location(kind, run, record_id)
        if location is None:
            self.index.refresh()
            location = self.index.location(kind, run, record_id)
        return location

    def record_ids(self, run: str, kind: str) -> list[str]:
        """The ids of `run`'s JOURNAL_RECORDS or RETIRED_RECORDS records, oldest first."""
        self.index.refresh()
        return self.index.ids(kinds.KIND_OF[kind], run)

    def known_record_ids(self, run: str, kind: str) -> list[str]:
        """record_ids() at this process's last look at the segments (no refresh; see Repository.known_head)."""
        return self.index.ids(kinds.KIND_OF[kind], run)

    def poll_record_ids(self, run: str, kind: str, known: Iterable[str] = ()) -> set[str]:
        """The ids of `run`'s JOURNAL_RECORDS or RETIRED_RECORDS records now, unordered, for a caller that polls."""
        self.index.refresh()
        return set(self.index.ids(kinds.KIND_OF[kind], run))

    def record_size(self, run: str, kind: str, record_id: str) -> int | None:
        """The bytes of a record's body; None if it is gone."""
        location = self._location(kinds.KIND_OF[kind], run, record_id)
        if location is None:
            return None
        if self.sealer is None:
            return location.length - fmt.record_overhead(len(kinds.pair_key(run, record_id)))
        # sealed: its location may be a group's, so the frame's length says nothing of it
        return len(self.index.read(location, kinds.KIND_OF[kind], kinds.pair_key(run, record_id)).body)

    def local_records(self, kind: str) -> Iterator[tuple[str, str]]:
        """(run, id) of every JOURNAL_RECORDS or RETIRED_RECORDS record in the store."""
        self.index.refresh()
        return self.index.all_ids(kinds.KIND_OF[kind])

    # locks
    #
    # Lock order, so that no two processes (or threads) wait for each other: a writer slot (held from a
    # store's first write to its close), then a journal stripe (journal-NN), then the gc lock, then a run
    # stripe (run-NN); never two stripes of one kind.
    # - Slot first: with every slot taken, a new writer waits for the one its pid picks, until that holder
    #   closes; waiting with its run's stripe (or the gc lock) held, it would block that holder's next commit
    #   to the run, and the holder would never close (tests/engine/test_locks.py). So writing(), excluding_writers()
    #   and the stripes take this process's slot before their own lock.
    # - Journal, then gc and run: FORMAT.md lets a thread holding a journal lock commit; today none does
    #   (under journal_lock(run) a journal reads and appends that run's records: append_record takes no
    #   lock). Nothing takes a journal stripe with the gc lock or a run stripe held.
    # - gc, then a run stripe: commit and fork take a run stripe under writing(); prune and gc may take one
    #   under excluding_writers() (a read_entry that fetches from a remote installs the entry under its
    #   run's stripe). Nothing takes the gc lock with a run stripe held: writing() is only taken by
    #   Run.commit and Run.fork, which no code runs under a run stripe.
    # - Never two run stripes: under appending(run) a commit reads only that run's head and entries (one
    #   fetched from a remote is installed under the same stripe: re-entrant), appends, and makes durable
    #   what it relies on from the index (no fetch, no lock); install_entry (pull, repair, lazy reads)
    #   records forks (note_fork: no lock) before it takes its one stripe. Two runs on one stripe are one
    #   lock, re-entrant for the thread that holds it.

    def _stripe(self, kind: str, run: str) -> AbstractContextManager[None]:
        """Hold `run`'s stripe lock of `kind`; a thread that holds it already (a nested append) just goes on."""
        self._segment_writer()  # a writer slot before the stripe: see the lock order above
        try:
            held: set[str] = self._held.paths
        except AttributeError:  # this thread's first stripe
            held = self._held.paths = set()
        return _StripeHold(self._lock_files, _stripe_lock_path(self._locks_path, kind, run), held)

    def appending(self, run: str) -> AbstractContextManager[None]:
        """Held around one append to the run's log: who holds it reads the head and appends after it."""
        return self._stripe("run", run)

    def journal_lock(self, run: str) -> AbstractContextManager[None]:
        """Held while a journal reads the run's records, decides and records a call's start."""
        return self._stripe("journal", run)

    def writing(self) -> AbstractContextManager[None]:
        """Held shared by every commit from its first object write to its entry; compaction runs under it exclusively.
        A write in flight: close() waits for it to end (stop_writes)."""
        self._segment_writer()  # a writer slot before the gc lock: see the lock order above
        return _InFlight(self, self._lock_files.hold(self._gc_lock_path, SHARED))

    def excluding_writers(self) -> AbstractContextManager[None]:
        """Held exclusively by prune and gc: no commit is between choosing what to borrow and appending its entry."""
        self._segment_writer()  # a writer slot before the gc lock: see the lock order above
        return _InFlight(self, self._lock_files.hold(self._gc_lock_path, EXCLUSIVE))

    def where_stored(self, run: str, kind: str, record_id: str) -> str:
        """Where an entry (kind LOG_RECORDS) or record lies, for messages: its segment and offset, then its name."""
        location = self.index.location(kinds.KIND_OF[kind], run, record_id)
        where = str(self.segments_dir) if location is None else self.index.where(location)
        return f"{where}: {kind} record {run}/{record_id}"

    def repair_record(self, run: str, kind: str, record_id: str, data: bytes) -> None:
        """Append verified bytes of a record found damaged here: reads then take this intact copy. Durable as append_record."""
        self._append([fmt.Record(kinds.KIND_OF[kind], kinds.pair_key(run, record_id), data)], True)

    def watched_dir(self) -> Path:
        """Where every commit makes a file-system event: watch it for hints of new checkpoints."""
        return self.segments_dir


class _InFlight:
    """`with` support for a write in flight: counted for close() (stop_writes), then the lock `hold`."""

    __slots__ = ("_hold", "_store")

    def __init__(self, store: SegmentStore, hold: AbstractContextManager[None]) -> None:
        self._store, self._hold = store, hold

    def __enter__(self) -> None:
        store = self._store
        with store._gate:
            store._check_open()
            store._in_flight += 1
            store._inside.depth = getattr(store._inside, "depth", 0) + 1
        try:
            self._hold.__enter__()
        except BaseException:
            self._leave()
            raise

    def __exit__(self, *exc_info: object) -> None:
        try:
            self._hold.__exit__(None, None, None)  # a lock's release, whatever ended the block
        finally:
            self._leave()

    def _leave(self) -> None:
        store = self._store
        with store._gate:
            store._in_flight -= 1
            store._inside.depth -= 1
            store._gate.notify_all()


class _StripeHold:
    """`with` support for one hold of a stripe (a class, not a generator: it runs once or twice per commit)."""

    __slots__ = ("_held", "_hold", "_lock_files", "_path")

    def __init__(self, lock_files: LockFiles, path: str, held: set[str]) -> None:
        self._lock_files, self._path, self._held = lock_files, path, held
        self._hold: AbstractContextManager[None] | None = None

    def __enter__(self) -> None:
        if self._path in self._held:  # this thread holds it already
            return
        hold = self._lock_files.hold(self._path, EXCLUSIVE)
        hold.__enter__()
        self._held.add(self._path)
        self._hold = hold

    def __exit__(self, *exc_info: object) -> None:
        if self._hold is not None:
            self._held.discard(self._path)
            self._hold.__exit__(None, None, None)  # a lock's release, whatever ended the block


@functools.lru_cache(maxsize=4096)
def _stripe_lock_path(locks: str, kind: str, run: str) -> str:
    """locks/<kind>-NN of `run`, computed once per run (a sha256 and a path join per commit otherwise)."""
    return os.path.join(locks, keys.stripe_lock_key(kind, run)[1])
