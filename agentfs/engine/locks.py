"""flock(2) locks on files under locks/.

The lock file stays after release: unlinking a held lock splits waiters across inodes.

`flock` opens a descriptor per hold (the config lock, taken rarely). `LockFiles` keeps one descriptor
per lock file open across holds (a store's fixed set: run and journal stripes, gc), so that a commit
opens and closes no file for its locks. Hazard: flock belongs to the open file description, so one
descriptor does not exclude two threads of this process from each other (a second flock on it only
converts the lock it holds, and either thread's unlock releases both): each file's holders in this
process are also tracked, and a thread waits for the others (shared with shared, exclusive alone)
before it touches the flock.

Closing: `LockFiles.close()` may run while a thread of the store holds a lock (close() from inside a run's
or journal's lock) and others wait for one. Hazard: closing a held descriptor made the holder's unlock a
bare EBADF (or, with the number reused, an unlock of another file), and a waiter blocked forever on a lock
whose holder waited for it to leave (close() waits for commits in flight). So a held file's descriptor is
closed by its last holder's release, and from `interrupt()` on, a thread waiting for a lock gives up with
StoreClosed (tests/engine/test_close_from_any_thread.py).
"""

from __future__ import annotations

import fcntl
import os
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

from ..errors import StoreClosed

SHARED = fcntl.LOCK_SH
EXCLUSIVE = fcntl.LOCK_EX
POLL = 0.05  # seconds between a lock waiter's looks at whether the store is closing


@contextmanager
def flock(path: str | Path, mode: int) -> Iterator[None]:
    """Hold `path` locked (SHARED or EXCLUSIVE), blocking until it is free; closing releases it."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, mode)
        yield
    finally:
        os.close(fd)


_forks = 0  # grows in a child at every fork: a LockFiles made before it holds the parent's descriptors


def _count_fork() -> None:
    global _forks
    _forks += 1


os.register_at_fork(after_in_child=_count_fork)


def forks() -> int:
    """How many forks made this process from the first one that imported agentfs (0 there)."""
    return _forks


class _LockFile:
    """One lock file's descriptor, and this process's threads that hold its flock.

    `_resource` is held by an exclusive holder, or by the sharers together (taken by the first, released
    by the last: a threading.Lock may be released by another thread than the one that took it).
    `holds`: the context manager of each mode, made once (a hold keeps no state of its own)."""

    def __init__(self, path: str, closing: threading.Event) -> None:
        self.path = path
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        self._closing = closing
        self._resource = threading.Lock()
        self._counting = threading.Lock()
        self._ending = threading.Lock()  # orders close() against a holder's release
        self._close_when_free = False
        self._sharers = 0
        self.holds: dict[int, AbstractContextManager[None]] = {SHARED: _Shared(self), EXCLUSIVE: _Exclusive(self)}

    def take(self, mode: int) -> None:
        if not self._resource.acquire(blocking=False):
            while not self._resource.acquire(timeout=POLL):
                if self._closing.is_set():
                    raise StoreClosed(f"the agentfs store is closing: gave up waiting for the lock {self.path}")
        try:
            if self.fd < 0:
                raise StoreClosed(f"the agentfs store is closed: its lock {self.path} is closed")
            fcntl.flock(self.fd, mode)
        except BaseException:
            self._resource.release()
            raise

    def give_back(self) -> None:
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        with self._ending:
            if self._close_when_free:
                self._close()
            self._resource.release()

    def close(self) -> None:
        """Close the descriptor now if no thread holds the lock, else at its holder's release."""
        with self._ending:
            if self._resource.acquire(blocking=False):
                try:
                    self._close()
                finally:
                    self._resource.release()
            else:
                self._close_when_free = True

    def _close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def share(self) -> None:
        with self._counting:  # a second sharer waits here until the first has the flock
            if self._sharers == 0:
                self.take(SHARED)
            self._sharers += 1

    def unshare(self) -> None:
        with self._counting:
            self._sharers -= 1
            if self._sharers == 0:
                self.give_back()


class _Exclusive:
    """`with` support for an exclusive hold (a class, not a generator: a commit takes one)."""

    __slots__ = ("_file",)

    def __init__(self, lock_file: _LockFile) -> None:
        self._file = lock_file

    def __enter__(self) -> None:
        self._file.take(EXCLUSIVE)

    def __exit__(self, *exc_info: object) -> None:
        self._file.give_back()


class _Shared:
    """`with` support for a shared hold."""

    __slots__ = ("_file",)

    def __init__(self, lock_file: _LockFile) -> None:
        self._file = lock_file

    def __enter__(self) -> None:
        self._file.share()

    def __exit__(self, *exc_info: object) -> None:
        self._file.unshare()


class LockFiles:
    """flock locks on a fixed set of files, each opened once and kept open until `close()`."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._files: dict[str, _LockFile] = {}
        self._forks = _forks
        self._closing = threading.Event()

    def hold(self, path: str, mode: int) -> AbstractContextManager[None]:
        """Hold `path` locked (SHARED or EXCLUSIVE) against other processes and this process's other threads."""
        if self._forks != _forks:
            # a forked child: the descriptors it inherited share their open file descriptions (and so their
            # locks) with the parent's, and the parent's threads may have held the guard at the fork
            self._guard, self._files, self._forks = threading.Lock(), {}, _forks
        lock_file = self._files.get(path)
        if lock_file is None:
            with self._guard:
                lock_file = self._files.get(path)
                if lock_file is None:
                    lock_file = self._files[path] = _LockFile(path, self._closing)
        return lock_file.holds[mode]

    def interrupt(self) -> None:
        """From now on a thread waiting for one of these locks in this process gives up with StoreClosed."""
        self._closing.set()

    def close(self) -> None:
        """Close every descriptor: now, or for a lock a thread holds, at its release."""
        self.interrupt()
        with self._guard:
            for lock_file in self._files.values():
                lock_file.close()
            self._files.clear()
