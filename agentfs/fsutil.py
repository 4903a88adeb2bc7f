"""Atomic, durable file writes: temp file in tmp/, fsync, rename, directory fsync."""

from __future__ import annotations

import contextlib
import ctypes
import os
import secrets
import sys
from pathlib import Path

# (st_dev, st_ino) of directories whose entry this process made durable in their parent, and their
# parents' in theirs: see make_dirs. Also the directory each store lives in (see trust_above).
_durable_dirs: set[tuple[int, int]] = set()


def _fsync(path: Path, flags: int) -> None:
    fd = os.open(path, flags)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: Path) -> None:
    _fsync(path, os.O_RDONLY | os.O_DIRECTORY)


def fsync_file(path: Path) -> None:
    """Make a file's bytes durable, whoever wrote them."""
    _fsync(path, os.O_RDONLY)


# sync_file_range(2), which the os module lacks; Linux only (elsewhere start_writeback does nothing)
_sync_file_range = getattr(ctypes.CDLL(None, use_errno=True), "sync_file_range", None) if sys.platform == "linux" else None
if _sync_file_range is not None:
    _sync_file_range.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
    _sync_file_range.restype = ctypes.c_int
_SYNC_FILE_RANGE_WRITE = 2


def start_writeback(fd: int, offset: int, length: int) -> None:
    """Have the kernel start writing these bytes of the file to disk now, without waiting for it.

    Only a hint, and never a substitute for a sync: the fdatasync that makes them durable later has
    less left to wait for (a 256 MiB artifact's final sync: 25 ms -> 3 ms here). A failure (a file
    system that does not support it) only loses the head start, so its result is not checked."""
    if _sync_file_range is not None:
        _sync_file_range(fd, offset, length, _SYNC_FILE_RANGE_WRITE)


def drop_cached(fd: int, offset: int, length: int) -> None:
    """Let the kernel drop these bytes of the file from its page cache (POSIX_FADV_DONTNEED), where it has
    written them to disk already: dirty pages and pages under writeback stay. Only a hint, as above."""
    if hasattr(os, "posix_fadvise"):
        os.posix_fadvise(fd, offset, length, os.POSIX_FADV_DONTNEED)


def _dir_key(path: Path) -> tuple[int, int] | None:
    try:
        stat = os.stat(path)
    except FileNotFoundError:
        return None
    return stat.st_dev, stat.st_ino


def trust_above(path: Path) -> None:
    """Stop make_dirs at the nearest existing directory above `path`: its durability is its maker's."""
    for ancestor in path.parents:
        key = _dir_key(ancestor)
        if key is not None:
            _durable_dirs.add(key)
            return


def temp_path(tmp_dir: Path, suffix: str = ".tmp") -> Path:
    """A new name in `tmp_dir`, `<pid>-<random><suffix>`: the writing process's id first, so that a sweep of the
    directory can tell a file still being written (its process runs) from debris (writer_alive)."""
    return tmp_dir / f"{os.getpid()}-{secrets.token_hex(12)}{suffix}"


def writer_alive(temp: Path) -> bool:
    """Whether the process that named `temp` (temp_path) still runs on this machine, so the file may be about to be
    renamed into place. Hazard: gc with grace 0 swept tmp/ and deleted a seal copy's file before its writer renamed
    it, and that writer's close() failed (tests/engine/test_gc.py, the closing writer's seal copy). False for a
    name without a process id (an earlier agentfs's) and for a process that is gone (killed: its file is debris)."""
    pid, dash, _rest = temp.name.partition("-")
    if not dash or not pid.isdigit() or int(pid) <= 0:
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True  # another user's process, or an id too large to be checked: kept until its grace has passed again
    return True


def write_temp(tmp_dir: Path, data: bytes | memoryview, *, sync: bool) -> Path:
    """Write `data` to a new file in `tmp_dir`; fsync it when `sync`."""
    path = temp_path(tmp_dir)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
    return path


def publish(temp: Path, final: Path) -> bool:
    """Move `temp` to `final` without replacing an existing file; False if `final` already existed.

    link + unlink instead of rename: rename would silently replace a file another writer published.
    """
    try:
        os.link(temp, final)
    except FileExistsError:
        return False
    finally:
        temp.unlink(missing_ok=True)
    return True


def make_dirs(path: Path, *, sync: bool) -> None:
    """mkdir -p; with `sync`, `path` and each directory above it (up to one trust_above named) are
    also made durable in their parents, each once per process.

    Hazard: a directory that already exists may have been made by a process killed before it
    fsynced the parent (or by one with durability="process"): what is written into it and fsynced
    would still vanish with it on power loss. So an existing directory is trusted only once this
    process has fsynced its parent (tests/engine/test_crash_states.py, the restart workload).
    """
    key = _dir_key(path)
    if (key is not None and (not sync or key in _durable_dirs)) or path.parent == path:
        return
    make_dirs(path.parent, sync=sync)
    if key is None:
        with contextlib.suppress(FileExistsError):  # made meanwhile by another process
            path.mkdir()
    if sync:
        fsync_dir(path.parent)
        made = _dir_key(path)
        if made is not None:
            _durable_dirs.add(made)


def write_atomic(tmp_dir: Path, final: Path, data: bytes, *, sync: bool, exclusive: bool = True) -> bool:
    """Durably create `final` holding `data`; False if it already existed (exclusive) ."""
    make_dirs(final.parent, sync=sync)
    temp = write_temp(tmp_dir, data, sync=sync)
    if exclusive:
        created = publish(temp, final)
    else:
        os.replace(temp, final)
        created = True
    if sync and created:
        fsync_dir(final.parent)
    return created


def write_all(fd: int, data: bytes, offset: int) -> None:
    """Write all of `data` at `offset` of the file open as `fd` (pwrite may write less)."""
    written = os.pwrite(fd, data, offset)
    if written == len(data):  # as almost always: no view to make
        return
    view, offset = memoryview(data)[written:], offset + written
    while view:
        written = os.pwrite(fd, view, offset)
        view, offset = view[written:], offset + written
