"""Reading a directory of format-2 segment files (agentfs/format/segment.py has the bytes).

A sealed segment is opened from its trailer and footer alone; an unsealed one is scanned from its
header to the zeros that end its data. Damage never stops a scan: a batch that fails its checks is
reported (one line naming the file and offset) and the scan resumes at the next intact batch, found
through the length its intact BEGIN frame states or else by searching for the batch magic. Bytes after
the last intact batch with no intact batch after them are a torn tail (a crash mid-append): ignored,
not reported, and overwritten by the next writer of that segment (segment_writer.py).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

from ..errors import AgentFSError, FormatError, IntegrityError, NotFound, StorageError
from ..format import kinds
from ..format import segment as fmt

READ_CHUNK = 1 << 20
SNAPSHOT_BOUND = 8  # an index snapshot longer than this many times its segment is no snapshot: not read whole
LOST_NAMED = 20  # checkpoints named in the report of a damaged sealed segment; the rest are counted


class FrameLocation(NamedTuple):
    """Where a record's frame lies: its segment and the frame's offset and length (format/refs.py's EntryAddress names an entry)."""

    segment_id: int
    offset: int
    length: int


@dataclasses.dataclass
class SegmentView:
    """What a reader knows about one segment after opening it."""

    path: Path
    header: fmt.Header
    sealed: bool
    entries: list[fmt.IndexEntry]
    end: int  # where the intact data ends: the footer of a sealed segment, else the next append's offset
    torn_end: int  # an unsealed segment's last nonzero byte + 1 past `end` (a torn tail), else `end`
    problems: list[str]


@contextlib.contextmanager
def storing(operation: str, path: Path | str) -> Iterator[None]:
    """Turn a failed file operation (ENOSPC, EIO, ...) into a StorageError naming `operation` and `path`."""
    try:
        yield
    except OSError as exc:
        if isinstance(exc, AgentFSError):
            raise
        raise StorageError(exc.errno, f"{operation} {path}: {exc.strerror or exc}") from exc


def _pread(fd: int, length: int, offset: int) -> bytes:
    data = os.pread(fd, length, offset)
    while len(data) < length:
        more = os.pread(fd, length - len(data), offset + len(data))
        if not more:
            break
        data += more
    return data


class Window:
    """Reads a file forward through a buffer of READ_CHUNK bytes (one pread per chunk)."""

    def __init__(self, fd: int, size: int) -> None:
        self.fd, self.size = fd, size
        self.start, self.buffer = 0, b""

    def read(self, offset: int, length: int) -> bytes:
        at = offset - self.start
        if at >= 0 and length >= 0 and at + length <= len(self.buffer):  # within the buffer (which the file holds whole)
            return self.buffer[at : at + length]
        length = max(0, min(length, self.size - offset))
        if not (self.start <= offset and offset + length <= self.start + len(self.buffer)):
            self.start, self.buffer = offset, _pread(self.fd, max(length, READ_CHUNK), offset)
        return self.buffer[offset - self.start : offset - self.start + length]


def batch_reader(fd: int, size: int, offset: int, length: int) -> fmt.Read:
    """Reads the frames of the batch at `offset` that claims `length` bytes: one pread if it is at most READ_CHUNK,
    else a frame at a time through a Window, so a crafted length is never allocated whole."""
    if length > READ_CHUNK:
        return Window(fd, size).read
    data = _pread(fd, max(0, min(length, size - offset)), offset)
    return lambda at, count: data[at - offset : at - offset + count]


class SnapshotSegment(NamedTuple):
    """An unsealed segment opened through its index snapshot (FORMAT.md "Index snapshots"): the snapshot's footer,
    read and checked but not decoded, indexes the batches it covers; `tail` is a scan of those after them."""

    footer: fmt.Footer
    tail: SegmentView


class SealedSegment(NamedTuple):
    """A sealed segment whose footer was read and checked but not decoded (its rows are read in place)."""

    header: fmt.Header
    footer: fmt.Footer
    end: int  # the footer's offset: where the records end
    damage: str = ""  # a sealed segment found truncated or damaged (read through its seal copy): what it lost


def open_segment(path: Path, expand: fmt.Expand | None = None) -> SegmentView:
    """Open one segment: the footer of a sealed one, decoded whole, or a scan of an unsealed one (an encrypted
    store's groups opened by `expand`, fmt.decode_batch)."""
    opened = open_indexed(path, expand)  # an unsealed segment scanned whole: writers and compaction trust no snapshot
    if isinstance(opened, SegmentView):
        return opened
    assert isinstance(opened, SealedSegment)
    problems = [opened.damage] if opened.damage else []
    try:
        entries = opened.footer.entries()
    except AgentFSError as exc:
        view = scan_from(path, fmt.HEADER.size, expand)
        view.problems[:0] = [*problems, f"{exc}; scanning the segment instead"]
        return view
    return SegmentView(path, opened.header, True, entries, opened.end, opened.end, problems)


def _open_file(path: Path, flags: int = os.O_RDONLY) -> int:
    """A descriptor of the segment file at `path`; FormatError naming it for an entry that is not a file
    (a directory or a foreign entry named like a segment), FileNotFoundError if it is gone."""
    try:
        fd = os.open(path, flags)
    except (IsADirectoryError, NotADirectoryError, PermissionError) as exc:
        raise FormatError(f"{path} is not an agentfs segment ({exc.strerror}): skipped") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise FormatError(f"{path} is not an agentfs segment (not a regular file): skipped")
    return fd


def open_indexed(path: Path, expand: fmt.Expand | None = None, *, snapshots: bool = False) -> SegmentView | SealedSegment | SnapshotSegment:
    """Open one segment for an index: the footer of a sealed one (read, checked, not decoded), a scan of an unsealed one,
    or, with `snapshots`, an unsealed one's intact index snapshot and a scan of what follows it only.

    A segment whose seal copy (fmt.SealCopy) proves it sealed but that has no intact seal of its own now
    (truncated, or its end damaged) is indexed through the copy's footer, its damage named (`damage`): its
    records that lie past its end are reported lost, never silently dropped (tests/engine/test_segment_faults.py)."""
    fd = _open_file(path)
    try:
        size = os.fstat(fd).st_size
        try:
            header = fmt.decode_header(_pread(fd, fmt.HEADER.size, 0), str(path))
            if fmt.segment_id_of(path.name) != header.segment_id:
                raise FormatError(f"{path}: its header names segment {header.segment_id}")
        except AgentFSError as exc:
            copy = seal_copy(path, None)
            if copy is None:
                raise
            return _from_seal_copy(path, size, copy, str(exc))
        problems: list[str] = []
        if size >= fmt.HEADER.size + fmt.TRAILER.size:
            pointer = fmt.decode_trailer(_pread(fd, fmt.TRAILER.size, size - fmt.TRAILER.size), size)
            if pointer is not None:
                offset, length = pointer
                try:
                    footer = fmt.read_footer(_pread(fd, length, offset), header.segment_id, offset, str(path))
                except AgentFSError as exc:
                    problems.append(f"{exc}; scanning the segment instead")
                else:
                    return SealedSegment(header, footer, offset)
        copy = seal_copy(path, header)
        if copy is not None:
            return _from_seal_copy(path, size, copy, "; ".join(problems) or "it has no intact seal")
        snapshot = _snapshot(fd, size, path, header) if snapshots and not problems else None
        if snapshot is not None:
            footer, end = snapshot
            return SnapshotSegment(footer, _scan(fd, size, path, header, problems, end, expand))
        return _scan(fd, size, path, header, problems, expand=expand)
    finally:
        os.close(fd)


def snapshot_path(path: Path) -> Path:
    """Where the index snapshot of the unsealed segment at `path` lies."""
    return path.with_suffix(fmt.SNAPSHOT_SUFFIX)


def _snapshot(fd: int, size: int, path: Path, header: fmt.Header) -> tuple[fmt.Footer, int] | None:
    """(footer, end) of the unsealed segment's index snapshot if one belongs to it and still describes it, else None.

    A snapshot is a cache, never the truth: one that is torn, damaged, another segment's (an id taken again), cut
    longer than the segment, or whose end is not where an intact batch ends (the segment truncated or overwritten
    since) is ignored, and the segment is scanned whole as before. Every record it lists is still checked when read:
    a damaged frame under a snapshot is refused as under a footer (tests/engine/test_index_snapshots.py)."""
    where = snapshot_path(path)
    try:
        with open(where, "rb") as file:
            data = file.read(SNAPSHOT_BOUND * size + READ_CHUNK + 1)  # bounded: a footer's rows are fewer than its frames
    except OSError:
        return None
    try:
        copy = fmt.decode_seal_copy(data, str(where))
        end = copy.footer_offset
        if copy.header != header or end > size or not fmt.batch_ends_at(lambda at, count: _pread(fd, count, at), header.segment_id, end):
            return None
        return fmt.read_footer(copy.footer_frame, header.segment_id, end, str(where)), end
    except AgentFSError:
        return None


def seal_copy_path(path: Path) -> Path:
    """Where the seal copy of the segment at `path` lies."""
    return path.with_suffix(fmt.SEAL_COPY_SUFFIX)


def seal_copy(path: Path, header: fmt.Header | None) -> fmt.SealCopy | None:
    """The intact seal copy of the segment at `path` whose header is `header` (None: the segment's own header
    is unreadable, the copy's id must match its name); None if there is none, or it is another segment's
    (an id taken again after compaction deleted the segment it was first given to)."""
    where = seal_copy_path(path)
    try:
        copy = fmt.decode_seal_copy(where.read_bytes(), str(where))
    except (OSError, AgentFSError):
        return None  # no copy (or a damaged one): the segment is judged by its own bytes
    if header is None:
        return copy if copy.header.segment_id == fmt.segment_id_of(path.name) else None
    return copy if copy.header == header else None


def _from_seal_copy(path: Path, size: int, copy: fmt.SealCopy, why: str) -> SealedSegment:
    """A sealed segment found damaged, indexed through its seal copy's footer; `damage` names what it lost."""
    footer = fmt.read_footer(copy.footer_frame, copy.header.segment_id, copy.footer_offset, f"{path} (its seal copy)")
    entries = [(run, row) for kind, run in footer.runs if kind == kinds.ENTRY for row in footer.rows(kind, run)]
    lost = [f"{run}@{record_id}" for run, (record_id, offset, length) in entries if offset + length > size]
    objects = sum(offset + length > size for _oid, offset, length in footer.object_rows())
    named = ", ".join(lost[:LOST_NAMED]) + (", ..." if len(lost) > LOST_NAMED else "")
    damage = (
        f"{path}: a sealed segment of {copy.length} bytes (its seal copy says) holds {size} now and no intact seal "
        f"({why}): damaged or truncated; lost with it: {len(lost)} checkpoints ({named or 'none'}) and {objects} objects; "
        "`agentfs verify --repair` restores them from a remote that holds them"
    )
    return SealedSegment(copy.header, footer, copy.footer_offset, damage)


def scan_from(path: Path, start: int, expand: fmt.Expand | None = None) -> SegmentView:
    """Scan an unsealed segment from `start` (the end of what a reader already indexed): its new batches."""
    fd = _open_file(path)
    try:
        header = fmt.decode_header(_pread(fd, fmt.HEADER.size, 0), str(path))
        return _scan(fd, os.fstat(fd).st_size, path, header, [], start, expand)
    finally:
        os.close(fd)


def _scan(
    fd: int, size: int, path: Path, header: fmt.Header, problems: list[str], start: int = fmt.HEADER.size, expand: fmt.Expand | None = None
) -> SegmentView:
    window = Window(fd, size)
    entries: list[fmt.IndexEntry] = []
    position = end = start
    torn_end = end
    while position < size:
        head = window.read(position, fmt.BEGIN_FRAME)
        if head[: fmt.FRAME.size] == fmt.ZERO_FRAME[: len(head)] or _is_footer(window, position):
            break  # preallocated zeros, or the footer of a seal whose trailer never became durable
        length = fmt.batch_length(head, header.segment_id, position)
        if length is not None and position + length <= size:
            try:  # a frame at a time: a batch is never read whole (tests/engine/test_segment_limits.py)
                entries.extend(fmt.decode_batch(window.read, header.segment_id, position, str(path), expand, length=length))
            except AgentFSError as exc:
                # the intact BEGIN frame vouches for where the next batch starts; an intact END (or a
                # next batch) says the whole batch was written: damage, not a torn append
                following = position + length
                next_begin = window.read(following, fmt.BEGIN_FRAME)
                if fmt.ends_batch(window.read, position, length) or fmt.batch_length(next_begin, header.segment_id, following) is not None:
                    problems.append(f"damaged batch skipped: {exc}")
                    position = end = following
                    continue
            else:
                position = end = position + length
                continue
        found, last_nonzero = _next_batch(fd, size, header.segment_id, position)
        if found is None:
            torn_end = last_nonzero
            break
        problems.append(f"{path} offsets {position}..{found}: damaged bytes skipped up to the next intact batch")
        position = found
    return SegmentView(path, header, False, entries, end, max(end, torn_end), problems)


def _is_footer(window: Window, position: int) -> bool:
    head = window.read(position, fmt.FRAME.size)
    if len(head) < fmt.FRAME.size or head[-1] != fmt.KIND_FOOTER:
        return False
    try:
        fmt.decode_frame(window.read(position, fmt.frame_length(head)), "")
    except IntegrityError:
        return False
    return True


def _next_batch(fd: int, size: int, segment_id: int, position: int) -> tuple[int | None, int]:
    """(offset of the next intact BEGIN frame after `position`, or None; the offset past the last nonzero byte seen).

    Searches to the end of the file: a damaged frame must not hide a later intact batch. Reads
    overlapping chunks so that a BEGIN frame across a chunk boundary is found.
    """
    last_nonzero = position
    start = position + 1
    while start < size:
        chunk = _pread(fd, min(READ_CHUNK, size - start) + fmt.BEGIN_FRAME, start)
        stripped = len(chunk.rstrip(b"\0"))
        if stripped:
            last_nonzero = max(last_nonzero, start + stripped)
        candidate = fmt.find_batch_magic(chunk, 0)
        while candidate >= 0:
            if fmt.batch_length(chunk[candidate:], segment_id, start + candidate) is not None:
                return start + candidate, last_nonzero
            candidate = fmt.find_batch_magic(chunk, candidate + 1)
        start += READ_CHUNK
    return None, last_nonzero


def segment_ids(directory: Path) -> list[int]:
    """The ids of the segments in `directory`, oldest first."""
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    return ids_of(names)


def ids_of(names: list[str]) -> list[int]:
    """The segment ids among the file names `names`, oldest first."""
    return sorted(i for i in map(fmt.segment_id_of, names) if i is not None)


class SegmentReader:
    """Lists a directory of segments and reads records at their locations, verifying each frame."""

    def __init__(self, directory: Path, expand: fmt.Expand | None = None) -> None:
        self.directory, self.expand = directory, expand
        self.problems: list[str] = []

    def segments(self) -> Iterator[SegmentView]:
        """Each segment opened, oldest first; a segment that cannot be opened is reported and skipped."""
        for segment_id in segment_ids(self.directory):
            try:
                view = open_segment(self.directory / fmt.segment_name(segment_id), self.expand)
            except (AgentFSError, FileNotFoundError) as exc:  # a segment compacted away meanwhile is gone, not damage
                if not isinstance(exc, FileNotFoundError):
                    self.problems.append(str(exc))
                continue
            self.problems.extend(view.problems)
            yield view

    def records(self) -> Iterator[tuple[int, bytes, FrameLocation]]:
        """(kind, key, location) of every intact record, segment by segment in append order."""
        for view in self.segments():
            for entry in view.entries:
                yield entry.kind, entry.key, FrameLocation(view.header.segment_id, entry.offset, entry.length)

    def read(self, location: FrameLocation) -> fmt.Record:
        """The record at `location`; IntegrityError if its frame is damaged."""
        path = self.directory / fmt.segment_name(location.segment_id)
        where = f"{path} offset {location.offset}"
        try:
            fd = _open_file(path)
        except FileNotFoundError:
            raise NotFound(f"segment {path} does not exist") from None
        try:
            if location.length > fmt.MAX_RECORD_FRAME or location.offset + location.length > os.fstat(fd).st_size:
                raise IntegrityError(f"{where}: a record of {location.length} bytes claimed there, past the largest or the segment's end")
            return fmt.decode_record(_pread(fd, location.length, location.offset), where)
        finally:
            os.close(fd)


def peek(path: Path) -> tuple[fmt.Header, bool]:
    """A segment's header and whether it is sealed, from two small reads (and its seal copy's, when it has no
    intact seal: a sealed segment found damaged is never taken for an unsealed one to continue or seal again)."""
    fd = _open_file(path)
    try:
        size = os.fstat(fd).st_size
        header = fmt.decode_header(_pread(fd, fmt.HEADER.size, 0), str(path))
        trailer = _pread(fd, fmt.TRAILER.size, max(0, size - fmt.TRAILER.size))
        return header, fmt.decode_trailer(trailer, size) is not None or seal_copy(path, header) is not None
    finally:
        os.close(fd)
