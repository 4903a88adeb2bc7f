"""Sealing a segment (footer and trailer) and its seal copy beside it (FORMAT.md "Seal copies"), and the index
snapshot of a segment not yet sealed (FORMAT.md "Index snapshots").

The seal makes a segment immutable and opened by its footer; the copy, published only once the seal is
durable, proves the segment's length, so a truncated sealed segment is reported with what it lost instead
of read as an unsealed one's torn tail. The writer (segment_writer.py) seals its segments through here.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Collection, Iterable
from pathlib import Path

from ..errors import AgentFSError
from ..format import keys
from ..format import segment as fmt
from ..format.footer import FooterRows
from ..fsutil import fsync_dir, temp_path, write_all, write_temp
from .segments import SealedSegment, open_indexed, seal_copy_path, snapshot_path, storing

log = logging.getLogger("agentfs")


def tmp_dir_of(directory: Path) -> Path:
    """The store's tmp/ beside its segments/: the same file system, so a file made there can be linked in."""
    return directory.parent / keys.TMP


def _named(fd: int, path: Path) -> bool:
    """Whether `path` still names the file open as `fd`."""
    try:
        return os.path.samestat(os.fstat(fd), os.stat(path))
    except FileNotFoundError:
        return False


def write_seal(fd: int, path: Path, segment_id: int, position: int, rows: FooterRows, *, sync: bool) -> None:
    """Seal the segment at `path` (open as `fd`), whose batches end at `position` and whose records `rows` lists:
    footer and trailer, then its seal copy beside it.

    The copy (the header and the seal again, FORMAT.md "Seal copies") is published only once the seal is
    durable: a crash between leaves a sealed segment without a copy, which is whole but unprotected."""
    seal = fmt.seal_of(position, rows.encode(segment_id))
    with storing("sealing segment", path):
        write_all(fd, seal, position)
        os.ftruncate(fd, position + len(seal))  # drops the unused preallocation and any torn tail
        if sync:
            os.fsync(fd)  # the size changed: fdatasync would do it too, fsync says so
        header = os.pread(fd, fmt.HEADER.size, 0)
        if not _named(fd, path):
            return  # its name was deleted by hand (and may be another segment's now): nothing to prove
    _publish_seal_copy(path, header, seal, sync=sync)


def write_snapshot(path: Path, header: bytes, position: int, rows: FooterRows) -> None:
    """Publish the index snapshot of the unsealed segment at `path` (its `header` bytes): a seal copy's bytes for its
    batches up to `position`, whose records `rows` lists, so that an index opening the segment scans only what follows.

    The caller calls it only once those batches are durable (after a synced append): a snapshot never outlives
    the batches it lists. It is not synced itself: a crash may leave it torn or gone, and a reader then ignores it
    and scans (segments.py, _snapshot). A snapshot is a cache: a failure to write it (ENOSPC) loses nothing and
    stops no commit; it is logged and the segment is scanned as before."""
    temp = temp_path(tmp_dir_of(path.parent), fmt.SNAPSHOT_SUFFIX)
    segment_id = fmt.segment_id_of(path.name)
    assert segment_id is not None
    try:
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            write_all(fd, fmt.encode_seal_copy(header, fmt.seal_of(position, rows.encode(segment_id))), 0)
        finally:
            os.close(fd)
        os.replace(temp, snapshot_path(path))
    except OSError as exc:
        temp.unlink(missing_ok=True)
        log.debug("no index snapshot of %s: %s", path, exc)


def drop_snapshot(path: Path) -> None:
    """Remove the index snapshot of the segment at `path`, if any: sealed or gone, it needs none."""
    try:
        snapshot_path(path).unlink(missing_ok=True)
    except OSError as exc:
        log.debug("index snapshot of %s left: %s", path, exc)


def _publish_seal_copy(path: Path, header: bytes, seal: bytes, *, sync: bool) -> None:
    """Write the seal copy of the segment at `path` (its `header` and `seal` bytes) atomically: in tmp/, renamed in."""
    copy = seal_copy_path(path)
    with storing("writing the seal copy", copy):
        os.replace(write_temp(tmp_dir_of(path.parent), fmt.encode_seal_copy(header, seal), sync=sync), copy)
        if sync:
            fsync_dir(path.parent)


def protect_sealed(directory: Path, sealed: Iterable[int], names: Collection[str], *, sync: bool) -> list[Path]:
    """Give each segment of `sealed` that is sealed whole but has no seal copy among `names` (the directory's
    listing, the index's last) its copy now; the segments protected.

    Hazard: a segment sealed by an agentfs that predates seal copies (or by a writer killed between the
    seal and its copy) has none, so a later truncation of it read as an unsealed segment's torn tail and
    lost its checkpoints silently. Store open calls this for its sealed segments (tests/
    tests/engine/test_segment_faults.py, the store sealed before seal copies). The seal is made durable (fsync of the
    segment) before the copy that vouches for it is published, as a seal's own copy is."""
    protected = []
    for segment_id in sealed:
        if fmt.seal_copy_name(segment_id) in names:
            continue
        path = directory / fmt.segment_name(segment_id)
        try:
            opened = open_indexed(path)
        except (AgentFSError, FileNotFoundError):
            continue  # damaged or gone: nothing whole to vouch for
        if not isinstance(opened, SealedSegment) or opened.damage:
            continue
        fd = os.open(path, os.O_RDONLY)
        try:
            with storing("reading the seal of segment", path):
                header, seal = os.pread(fd, fmt.HEADER.size, 0), os.pread(fd, os.fstat(fd).st_size - opened.end, opened.end)
                if sync:
                    os.fsync(fd)
        finally:
            os.close(fd)
        _publish_seal_copy(path, header, seal, sync=sync)
        protected.append(path)
    return protected
