"""The segment files an index reads records from: read-only descriptors kept open, and a record's frame read
at a location and verified (engine/index.py decides which location; this module reads it).

A descriptor stays open until the index closes (or rebuilds); one a thread is reading through is closed by
its last user instead, so a close from another thread never pulls a descriptor from under a read.
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from ..errors import IntegrityError, NotFound
from ..format import kinds
from ..format import segment as fmt
from ..format.crypto import Sealer
from .segments import FrameLocation, storing

T = TypeVar("T")


def _close_all(fds: dict[int, int]) -> None:
    for fd in fds.values():
        os.close(fd)
    fds.clear()


class SegmentFiles:
    """The segments of `directory`, read through descriptors kept open; thread-safe. With a `sealer` (an encrypted
    store) a record's body is authenticated and its key made plain before it is returned."""

    def __init__(self, directory: Path, sealer: Sealer | None = None) -> None:
        self.directory = directory
        self.sealer = sealer
        self._lock = threading.Lock()
        self._fds: dict[int, int] = {}
        weakref.finalize(self, _close_all, self._fds)
        self._users: dict[int, int] = {}  # descriptor -> the threads using it now (use())
        self._retired: dict[int, int] = {}  # descriptors closed by close() while in use: closed by their last user
        weakref.finalize(self, _close_all, self._retired)
        self._names: dict[int, str] = {}

    def path(self, segment_id: int) -> Path:
        return self.directory / fmt.segment_name(segment_id)

    def name(self, segment_id: int) -> str:
        """The segment's path as a string for messages, made once per segment (not per batch)."""
        where = self._names.get(segment_id)
        if where is None:
            where = self._names[segment_id] = str(self.path(segment_id))
        return where

    def where(self, location: FrameLocation) -> str:
        return f"{self.name(location.segment_id)} offset {location.offset}"

    def close(self) -> None:
        """Close the descriptors kept open (one a thread is reading through, at the end of its use()). A later
        read (a checkpoint of a closed store read lazily) opens one again; those are closed when the files are
        collected."""
        with self._lock:
            for segment_id, fd in self._fds.items():
                if fd in self._users:
                    self._retired[fd] = segment_id
                else:
                    os.close(fd)
            self._fds.clear()

    def fd(self, segment_id: int) -> int | None:
        """A read-only descriptor of the segment, kept open; None if it is gone."""
        with self._lock:
            return self._fd(segment_id)

    def _fd(self, segment_id: int) -> int | None:
        fd = self._fds.get(segment_id)
        if fd is None:
            try:
                fd = self._fds[segment_id] = os.open(self.path(segment_id), os.O_RDONLY)
            except FileNotFoundError:
                return None
        return fd

    def use(self, segment_id: int, operation: str, action: Callable[..., T], *args: Any) -> T:
        """`action(descriptor, *args)` on a read-only descriptor of the segment; NotFound if it is gone, a StorageError
        naming `operation` and the segment if it fails (EIO).

        Hazard: close() (or a rebuild) in another thread would close the descriptor under the action, which
        then failed with a bare EBADF or, the number taken again by another open, read another file. A
        descriptor in use is closed only when its last user is done (tests/engine/test_close_from_any_thread.py)."""
        with self._lock:
            fd = self._fd(segment_id)
            if fd is None:
                raise NotFound(f"segment {self.path(segment_id)} does not exist (compacted away)")
            self._users[fd] = self._users.get(fd, 0) + 1
        try:
            with storing(operation, self.name(segment_id)):
                return action(fd, *args)
        finally:
            with self._lock:
                left = self._users.pop(fd) - 1
                if left:
                    self._users[fd] = left
                elif self._retired.pop(fd, None) is not None:
                    os.close(fd)

    def pread(self, segment_id: int, length: int, offset: int) -> bytes:
        """`length` bytes of the segment at `offset` (see use())."""
        return self.use(segment_id, "reading segment", os.pread, length, offset)

    def read(self, location: FrameLocation, kind: int | None = None, key: bytes | None = None) -> fmt.Record:
        """The record at `location` (of `kind` and plain `key`, if known), its frame verified; IntegrityError if damaged.

        The length a footer or batch claims is checked against the kind's largest record and the segment's
        size before anything is allocated (tests/engine/test_segment_limits.py). In an encrypted store the location
        may be a GROUP record's: the group is authenticated whole, and the record (kind, key) taken from it."""
        where = self.where(location)
        largest = fmt.MAX_RECORD_FRAME if kind is None else max(fmt.max_record_frame(kind), self._largest_group())
        if location.length > largest:
            over = f"past the largest record ({largest})"
            raise IntegrityError(f"{where}: the index places a record of {location.length} bytes there, {over}")
        data = self.use(location.segment_id, "reading segment", _read_within, location, where)
        record = fmt.decode_record(data, where)
        if self.sealer is not None and record.kind == kinds.GROUP:
            return _member(self.sealer, record, kind, key, where)
        if self.sealer is None or record.kind not in kinds.KNOWN:
            return record
        body = self.sealer.open(record.kind, record.key, record.body, where)  # authenticated before anything decodes it
        return fmt.Record(record.kind, self.sealer.plain_key(record.kind, record.key, where), body)

    def _largest_group(self) -> int:
        return 0 if self.sealer is None else fmt.max_record_frame(kinds.GROUP)


def _member(sealer: Sealer, group: fmt.Record, kind: int | None, key: bytes | None, where: str) -> fmt.Record:
    """The record (kind, plain key) of the GROUP record `group`, the group authenticated and checked first.

    Each read opens the group again: keeping the last one opened saved a third of the openings of a
    conversation's history read (1,374 -> 905 for 300 steps) and no measurable time (1.3-1.6 s either way)."""
    members = sealer.open_group(group.key, group.body, where)
    if kind is None or key is None:
        raise IntegrityError(f"{where}: a group of records, read without naming which of its records")
    for member in members:
        if member.kind == kind and member.key == key:
            return fmt.Record(member.kind, member.key, member.body)
    raise IntegrityError(f"{where}: its group of records holds no {kinds.NAMES.get(kind, kind)} record {key[:80]!r}")


def _read_within(fd: int, location: FrameLocation, where: str) -> bytes:
    """The bytes at `location` of the segment open as `fd`, refused if they would run past its end."""
    if location.offset + location.length > os.fstat(fd).st_size:
        raise IntegrityError(f"{where}: the index places a record of {location.length} bytes there, past the segment's end")
    return os.pread(fd, location.length, location.offset)
