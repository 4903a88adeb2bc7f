"""Appending commit batches to format-2 segment files: one write and one fdatasync per batch.

A writer holds one slot lock of a fixed set (`locks/segment-writer-NN`, at most SLOTS files, never one
per run or per commit) and appends to the newest unsealed segment that slot owns. Taking a slot whose
lock was free ADOPTS the segment a dead (or closed) holder left: the writer continues after its last
intact batch, so it never rewrites an acknowledged byte, and overwrites the torn tail with the next
batch (padded with zeros up to the tail's last nonzero byte, in the same write). Older unsealed
segments of the slot (a crash between rollover and seal) are sealed, and so is the newest once it holds
SEAL_AT bytes or more, as a clean close would have.

Preallocation comes in steps, not the whole segment: a sixteenth of the data so far, at least
MIN_PREALLOCATION and at most PREALLOCATION_STEP bytes, so a store pays on disk for its data plus at
most one step (small next to the data) even while it is open. Durability "power": a new segment's first step is made durable
(file fsync, then the directory fsync for its new entry) before its first batch, so the per-batch
fdatasync has no size change or new entry to write; when the tail nears the end of the step, the
next step is allocated and the batch's fdatasync also writes the new size (once per step). A clean
close gives the unused preallocation back (ftruncate to the data end); the slot's next writer
allocates again. A step is allocated by writing zeros when the batch that needs it is synced: on ext4
a posix_fallocate'd extent is "unwritten" until written, so every fdatasync into it also records a
conversion (measured here: 0.21 ms against 0.14 ms for 10 KB into written zeros). Unsynced batches
(a large artifact's) and durability "process" use posix_fallocate, which writes nothing.
"""

from __future__ import annotations

import fcntl
import os
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Literal

from ulid import ULID

from ..errors import AgentFSError, StoreClosed
from ..format import segment as fmt
from ..format.footer import FooterRows
from ..format.lineage import EntryParent, lineage_records
from ..fsutil import fsync_dir, make_dirs, temp_path
from ..fsutil import write_all as _write_all  # the name tests/engine/test_segment_faults.py's rollover crash wraps
from .sealing import drop_snapshot, tmp_dir_of, write_seal, write_snapshot
from .segments import FrameLocation, open_segment, peek, seal_copy_path, segment_ids, snapshot_path, storing

Durability = Literal["power", "process"]
DURABILITY: tuple[str, ...] = ("power", "process")
SLOTS = 16
SEGMENT_BYTES = 64 << 20  # the size bound past which a writer rolls over to a new segment
PREALLOCATION_STEP = 1 << 20  # at most this many bytes allocated ahead of the tail at a time ...
MIN_PREALLOCATION = 64 << 10  # ... and at least this many
WRITEV_FROM = 256 << 10  # bytes: a batch this big is written from its parts (_write_parts)
IOV_MAX = os.sysconf("SC_IOV_MAX") if "SC_IOV_MAX" in os.sysconf_names else 1024
SEAL_AT = 1 << 20  # bytes: a segment this big is sealed on a clean close, and when adopted after a crash
SNAPSHOT_BYTES = 256 << 10  # bytes appended since the segment's last index snapshot (at least) before the next one


def _as_is(records: Sequence[fmt.Frame]) -> Sequence[fmt.Frame]:
    return records


def slot_lock_path(locks: Path, slot: int) -> Path:
    return locks / f"segment-writer-{slot:02d}"


def _acquire_slot(locks: Path, slots: int) -> tuple[int, int]:
    """(slot, descriptor holding its lock): the first free slot, else wait for one chosen by pid."""
    for slot in range(slots):
        fd = os.open(slot_lock_path(locks, slot), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        return slot, fd
    slot = os.getpid() % slots
    fd = os.open(slot_lock_path(locks, slot), os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return slot, fd


def _write_parts(fd: int, parts: list[bytes | bytearray], length: int, offset: int) -> None:
    """Write the parts, `length` bytes in all, at `offset`: joined when small (one pwrite), else by pwritev,
    IOV_MAX parts at a time, so that a large artifact's batches are not copied once more into one buffer
    (about 180 MB per 256 MiB committed). A short pwritev finishes through _write_all."""
    if length <= WRITEV_FROM:
        _write_all(fd, b"".join(parts), offset)
        return
    for first in range(0, len(parts), IOV_MAX):
        group = parts[first : first + IOV_MAX]
        size = sum(map(len, group))
        written = os.pwritev(fd, group, offset)
        if written < size:
            _write_all(fd, b"".join(group)[written:], offset + written)
        offset += size


def _allocate(fd: int, start: int, end: int, *, zeros: bool) -> None:
    """Make `start`..`end` of the file allocated zeros: written (see the module's docstring) or fallocated."""
    if zeros:
        _write_all(fd, bytes(end - start), start)
    else:
        os.posix_fallocate(fd, start, end - start)


def seal_orphans(directory: Path, locks: Path, *, durability: Durability, slots: int = SLOTS, expand: fmt.Expand | None = None) -> None:
    """Seal the unsealed segments of every slot no writer holds (its writers died or closed), for compaction (an
    encrypted store's groups opened by `expand`, so that its footer lists the records they hold)."""
    for slot in range(slots):
        path = slot_lock_path(locks, slot)
        if not path.exists():
            continue
        fd = os.open(path, os.O_RDWR)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                continue  # a live writer: its segment is its own
            for segment_id in segment_ids(directory):
                segment = directory / fmt.segment_name(segment_id)
                try:
                    header, sealed = peek(segment)
                except AgentFSError:
                    continue
                if header.slot == slot and not sealed:
                    view = open_segment(segment, expand)
                    rows = FooterRows()
                    rows.add(view.entries)
                    segment_fd = os.open(segment, os.O_RDWR)
                    try:
                        write_seal(segment_fd, segment, segment_id, view.end, rows, sync=durability == "power")
                    finally:
                        os.close(segment_fd)
        finally:
            os.close(fd)


class SegmentWriter:
    """Owns one writer slot and its current segment; `append` adds one commit batch."""

    def __init__(
        self,
        directory: Path,
        locks: Path,
        *,
        durability: Durability = "power",
        segment_bytes: int = SEGMENT_BYTES,
        slots: int = SLOTS,
        preallocation_step: int = PREALLOCATION_STEP,
        snapshot_bytes: int = SNAPSHOT_BYTES,
        expand: fmt.Expand | None = None,
        stored: Callable[[Sequence[fmt.Record]], Sequence[fmt.Frame]] = _as_is,
    ) -> None:
        """`expand`: an encrypted store's group opener (fmt.decode_batch), so that an adopted segment's seal lists
        the records its groups hold. `stored`: records (plain keys and bodies) as the segment holds them, each alone
        (an encrypted store's: keys stored, bodies sealed): the LINEAGE records a seal writes."""
        if durability not in DURABILITY:
            raise ValueError(f"durability must be one of {DURABILITY}, got {durability!r}")
        self.directory, self.segment_bytes, self.preallocation_step = directory, segment_bytes, preallocation_step
        self.snapshot_bytes = snapshot_bytes
        self.expand, self.stored = expand, stored
        self.sync = durability == "power"
        make_dirs(directory, sync=self.sync)
        make_dirs(locks, sync=self.sync)
        self.tmp = tmp_dir_of(directory)
        make_dirs(self.tmp, sync=self.sync)
        self.created: list[int] = []  # the segments this writer made, oldest first (a failed compaction removes its own)
        self.slot, self._lock_fd = _acquire_slot(locks, slots)
        self.writer = ULID().bytes
        self._mutex = threading.Lock()
        self._fd = -1
        self._path = ""  # the current segment's, as a str: access(2) on every append
        self.segment_id = self.position = self.allocated = self.torn_end = 0
        self.header = b""  # the current segment's header bytes (its index snapshots repeat them)
        self.footer_rows = FooterRows()  # the footer rows of `entries`: each index snapshot and the seal encode only new ones
        self.snapshot_end = 0  # where the batches the current segment's last index snapshot lists end
        self.entries: list[fmt.IndexEntry] = []
        self.parents: dict[bytes, EntryParent] = {}  # the current segment's ENTRY records (keys as stored) this writer appended
        try:
            self._adopt()
        except BaseException:
            self.close()
            raise

    def _adopt(self) -> None:
        """Continue the slot's newest unsealed segment; seal its older unsealed ones."""
        mine = []
        for segment_id in segment_ids(self.directory):
            try:
                header, sealed = peek(self.directory / fmt.segment_name(segment_id))
            except AgentFSError:  # a segment this writer cannot read (damaged, newer) is not one it continues
                continue
            if header.slot == self.slot and not sealed:
                mine.append(segment_id)
        for index, segment_id in enumerate(mine):
            view = open_segment(self.directory / fmt.segment_name(segment_id), self.expand)
            self._fd, self._path = os.open(view.path, os.O_RDWR), os.fspath(view.path)
            self.segment_id, self.entries, self.parents = segment_id, view.entries, {}
            self.position, self.torn_end, self.allocated = view.end, view.torn_end, os.fstat(self._fd).st_size
            self.header, self.snapshot_end = os.pread(self._fd, fmt.HEADER.size, 0), fmt.HEADER.size
            self.footer_rows = FooterRows()
            self.footer_rows.add(self.entries)
            # a big one left by a dead writer is sealed too (the next append starts a new segment): every open
            # until the slot's next clean close would scan it whole otherwise (0.8 s at 64 MiB of small commits)
            if index < len(mine) - 1 or view.end >= SEAL_AT:
                self._seal()
        if mine and self.sync:
            # a dead holder may have been killed before syncing its last batches, or the segment's directory
            # entry (it ran with durability "process"): this writer's fdatasyncs cover only what follows
            if self._fd >= 0:
                os.fsync(self._fd)
            fsync_dir(self.directory)

    def append(self, records: Sequence[fmt.Frame], *, sync: bool = True) -> list[FrameLocation]:
        """Append `records` as one batch (one write; one fdatasync with durability "power"); their locations.

        With `sync=False` no fdatasync: the caller's next synced append to this writer covers the batch
        (the same file; a roll in between seals, and so syncs, the segment it lies in)."""
        segment_id, _start, _end, entries = self.append_batch(records, sync=sync)
        return [FrameLocation(segment_id, entry.offset, entry.length) for entry in entries]

    def append_batch(
        self,
        records: Sequence[fmt.Frame],
        *,
        sync: bool = True,
        placed: Sequence[fmt.Placed] | None = None,
        parents: Mapping[bytes, EntryParent] | None = None,
    ) -> tuple[int, int, int, list[fmt.IndexEntry]]:
        """append(), returning what an index of the batch needs: (segment id, start, end, the records' index entries).

        `placed`: an encrypted store's records as they lie in `records`' frames (several in one GROUP frame):
        the index entries (and the footer's rows) are then theirs, each at its frame's location. `parents`: the
        run and parent of ENTRY records among them (by key as stored), for the LINEAGE records of the seal."""
        with self._mutex:
            if self._lock_fd < 0:  # closed: its slot is free, so another writer may append there now
                raise StoreClosed(f"the segment writer of {self.directory} is closed")
            parts, entries = fmt.batch_parts(self.segment_id, self.position, records)
            length = sum(map(len, parts))
            end = self.position + length
            full = end > self.segment_bytes and self.position > fmt.HEADER.size
            if self._fd < 0 or full or self._unlinked():
                self._roll(length, zeros=self.sync and sync)
                parts, entries = fmt.batch_parts(self.segment_id, self.position, records)
            # a failure below leaves at most a torn tail past `position`, which the next append overwrites
            with storing("appending a batch to segment", self._path):
                if self.position + length > self.allocated:
                    self._grow(self.position + length, zeros=self.sync and sync)
                padding = max(0, self.torn_end - self.position - length)  # zeros over what is left of a torn tail
                if padding:
                    parts.append(bytes(padding))
                _write_parts(self._fd, parts, length + padding, self.position)
                self.torn_end = max(self.torn_end, self.position + length + padding)
                if self.sync and sync:
                    os.fdatasync(self._fd)
            start = self.position
            self.position += length
            self.torn_end = max(self.position, self.torn_end)
            if placed is not None:
                entries = [fmt.IndexEntry(p.kind, p.key, entries[p.frame].offset, entries[p.frame].length) for p in placed]
            self.entries.extend(entries)
            self.footer_rows.add(entries)
            if parents:
                self.parents.update(parents)
            if sync and self.position - self.snapshot_end >= max(self.snapshot_bytes, self.snapshot_end // 8):
                # after a synced append only: every batch the snapshot lists is durable before it (FORMAT.md
                # "Index snapshots"); every eighth of the segment at most, each packing only the rows added since
                write_snapshot(Path(self._path), self.header, self.position, self.footer_rows)
                self.snapshot_end = self.position
            return self.segment_id, start, self.position, entries

    def current_segment(self) -> int | None:
        """The id of the segment the next append goes to, if one is open (None after a seal or close)."""
        return self.segment_id if self._fd >= 0 else None

    def _unlinked(self) -> bool:
        """Whether the current segment's name is gone (deleted by hand under its live writer): a segment
        without a name would swallow every later append, so the writer starts a new one.

        Hazard: no fstat/stat of the segment here, or anywhere on the append path. Linux >= 6.13 has
        "multigrain timestamps": once a file's ctime/mtime is queried, its next write takes a
        fine-grained timestamp, which dirties the inode on every write, and on ext4 without a journal
        the fdatasync then writes the inode too. Measured on kernel 6.18 (pwrite of 10 KB into written
        zeros + fdatasync): 0.10-0.11 ms median, 0.13-0.19 ms with an fstat before each write; a small
        commit's fdatasync 0.205 ms with the fstat here, 0.143 ms without. A path lookup (access(2))
        reads no attributes. It misses a name deleted and then taken again by another writer's new
        segment of the same id: a deletion by hand is out of the format's rules, and this check is a
        courtesy, not a guarantee."""
        return not os.access(self._path, os.F_OK)

    def _grow(self, end: int, *, zeros: bool) -> None:
        """Allocate the next step (and at least up to `end`) past the current allocation."""
        size = min(max(self.segment_bytes, end), max(end, self.allocated + self._step()))
        _allocate(self._fd, self.allocated, size, zeros=zeros)
        self.allocated = size

    def _step(self) -> int:
        return min(self.preallocation_step, max(MIN_PREALLOCATION, self.position // 16))

    def _roll(self, needed: int, *, zeros: bool) -> None:
        """Start a new segment with room for `needed` bytes, then seal the current one.

        Hazard: a segment must appear in segments/ only with its header durable. Created there, a crash
        (or ENOSPC) between the create and the header's sync left a 0-byte or header-less segment that
        every verify then called corrupt. So it is made in tmp/ (header, first step, fsync) and linked
        in under its id (tests/engine/test_segment_faults.py, the rollover crash)."""
        previous = self._fd
        size = fmt.HEADER.size + max(min(self.preallocation_step, MIN_PREALLOCATION), needed)
        segment_id = (segment_ids(self.directory) or [0])[-1] + 1
        temp = temp_path(self.tmp, fmt.SUFFIX)
        with storing("creating a segment at", temp):
            fd = os.open(temp, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            segment_id, path = self._link_new(fd, temp, segment_id, size, zeros=zeros)
        finally:
            os.close(fd)
            temp.unlink(missing_ok=True)
        with storing("opening new segment", path):
            fd = os.open(path, os.O_RDWR)  # by its name in segments/: a descriptor of the name tmp/ no longer holds
        if previous >= 0:
            self._seal()
        self.created.append(segment_id)
        self._fd, self._path, self.segment_id, self.allocated = fd, path, segment_id, size
        self.position = self.torn_end = self.snapshot_end = fmt.HEADER.size
        self.header = fmt.encode_header(segment_id, self.slot, self.writer)
        self.entries, self.parents, self.footer_rows = [], {}, FooterRows()

    def _link_new(self, fd: int, temp: Path, segment_id: int, size: int, *, zeros: bool) -> tuple[int, str]:
        """Give the new segment `temp` (open as `fd`) its header and first step, durably, and link it into
        segments/ under the first free id from `segment_id`; (that id, its path there)."""
        with storing("writing the header of a new segment at", temp):
            _allocate(fd, fmt.HEADER.size, size, zeros=zeros)
        while True:
            path = os.fspath(self.directory / fmt.segment_name(segment_id))
            with storing("writing the header of new segment", path):
                _write_all(fd, fmt.encode_header(segment_id, self.slot, self.writer), 0)
                if self.sync:
                    os.fsync(fd)  # the size and the header, before the segment has a name in segments/
                try:
                    os.link(temp, path)
                except FileExistsError:  # another writer took this id meanwhile (or a foreign entry holds it)
                    segment_id += 1
                    continue
                if self.sync:
                    fsync_dir(self.directory)  # the new entry: without it the segment vanishes with every batch in it
            return segment_id, path

    def seal(self) -> None:
        """Seal the current segment now (footer, trailer, fsync); the next append starts a new one."""
        with self._mutex:
            if self._fd >= 0:
                self._seal()

    def _seal(self) -> None:
        fd, self._fd = self._fd, -1  # closed whatever the seal's outcome: a segment that failed to seal is not appended to
        try:
            end = self.position
            lineage = self.stored(lineage_records(self.segment_id, self.entries, self.parents))
            if lineage:
                parts, added = fmt.batch_parts(self.segment_id, end, lineage)
                length = sum(map(len, parts))
                with storing("appending the lineage records of segment", self._path):
                    _write_parts(fd, parts, length, end)
                    if self.sync:
                        # durable before the footer that lists them: a crash cannot leave a seal naming lost frames
                        # (tests/engine/test_crash_states.py, workload rollover: a seal after commits)
                        os.fdatasync(fd)
                end = end + length
                self.footer_rows.add(added)
            write_seal(fd, Path(self._path), self.segment_id, end, self.footer_rows, sync=self.sync)
            drop_snapshot(Path(self._path))
        finally:
            os.close(fd)

    def discard(self, segment_ids: Iterable[int]) -> None:
        """Delete segments this writer made (a failed compaction's output) and their seal copies, durably."""
        with self._mutex:
            doomed = set(segment_ids)
            if self._fd >= 0 and self.segment_id in doomed:
                os.close(self._fd)
                self._fd = -1
            for segment_id in doomed:
                path = self.directory / fmt.segment_name(segment_id)
                with storing("removing segment", path):
                    path.unlink(missing_ok=True)
                    seal_copy_path(path).unlink(missing_ok=True)
                    snapshot_path(path).unlink(missing_ok=True)
            self.created = [segment_id for segment_id in self.created if segment_id not in doomed]
            if doomed and self.sync:
                fsync_dir(self.directory)

    def close(self) -> None:
        """Release the slot, leaving the segment unsealed for the slot's next writer to continue, holding only its data."""
        with self._mutex:
            try:
                if self._fd >= 0:
                    # the unused preallocation and any torn tail; no sync needed: if the cut is lost, zeros (or the
                    # torn tail) come back, which readers ignore and the next writer overwrites
                    with storing("truncating segment", self._path):
                        os.ftruncate(self._fd, max(self.position, fmt.HEADER.size))
            finally:
                for fd in (self._fd, self._lock_fd):
                    if fd >= 0:
                        os.close(fd)
                self._fd = self._lock_fd = -1

    def abandon(self) -> None:
        """Close this process's descriptors and touch nothing else: a forked child's copy of its parent's writer.

        The child's descriptors share their open file descriptions with the parent's: close() would cut the
        parent's segment back to what the child knew of it, and a LOCK_UN would free the parent's slot; a
        descriptor closed leaves the flock held by the parent's (tests/engine/test_locks.py, fork)."""
        for fd in (self._fd, self._lock_fd):
            if fd >= 0:
                os.close(fd)
        self._fd = self._lock_fd = -1

    def __enter__(self) -> SegmentWriter:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
