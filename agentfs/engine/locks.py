"""flock(2) locks on files under locks/.

The lock file stays after release: unlinking a held lock splits waiters across inodes.

`flock` opens a descriptor per hold (the config lock, taken rarely). `LockFiles` keeps one descriptor
per lock file open across holds (a store's fixed set: run and journal stripes, gc), so that a commit
opens and closes no file for its locks. Hazard: flock belongs to the open file description, so one
descriptor does not exclude two threads of this process from each other (a second flock on it only
converts the lock it holds, and either thread's unlock releases both): each file's holders in this
process are also tracked, and a thread waits for the others (shared with shared, exclusive alone)
before it touches the flock.
"""

from __future__ import annotations

import fcntl
import os
import threading
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

SHARED = fcntl.LOCK_SH
EXCLUSIVE = fcntl.LOCK_EX


@contextmanager
def flock(path: str | Path, mode: int) -> Iterator[None]:
    """Hold `path` locked (SHARED or EXCLUSIVE), blocking until it is free; closing releases it."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, mode)
        yield
    finally:
        os.close(fd)


class _LockFile:
    """One lock file's descriptor, and which threads of this process hold its flock."""

    def __init__(self, path: str) -> None:
        self.fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        self._state = threading.Condition(threading.Lock())
        self._sharers = 0  # threads holding it shared
        self._exclusive = False  # a thread holds it (or is taking its flock) exclusively

    @contextmanager
    def hold(self, mode: int) -> Iterator[None]:
        if mode == SHARED:
            with self._state:
                while self._exclusive:
                    self._state.wait()
                if self._sharers == 0:
                    fcntl.flock(self.fd, SHARED)  # under _state: a second sharer waits for this flock, not past it
                self._sharers += 1
            try:
                yield
            finally:
                with self._state:
                    self._sharers -= 1
                    if self._sharers == 0:
                        fcntl.flock(self.fd, fcntl.LOCK_UN)
                        self._state.notify_all()
            return
        with self._state:
            while self._exclusive or self._sharers:
                self._state.wait()
            self._exclusive = True
        try:
            fcntl.flock(self.fd, EXCLUSIVE)
            try:
                yield
            finally:
                fcntl.flock(self.fd, fcntl.LOCK_UN)
        finally:
            with self._state:
                self._exclusive = False
                self._state.notify_all()


class LockFiles:
    """flock locks on a fixed set of files, each opened once and kept open until `close()`."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._files: dict[str, _LockFile] = {}
        self._pid = os.getpid()

    def hold(self, path: str, mode: int) -> AbstractContextManager[None]:
        """Hold `path` locked (SHARED or EXCLUSIVE) against other processes and this process's other threads."""
        if self._pid != os.getpid():
            # a forked child: the descriptors it inherited share their open file descriptions (and so their
            # locks) with the parent's, and the parent's threads may have held the guard at the fork
            self._guard, self._files, self._pid = threading.Lock(), {}, os.getpid()
        lock_file = self._files.get(path)
        if lock_file is None:
            with self._guard:
                lock_file = self._files.get(path)
                if lock_file is None:
                    lock_file = self._files[path] = _LockFile(path)
        return lock_file.hold(mode)

    def close(self) -> None:
        with self._guard:
            for lock_file in self._files.values():
                os.close(lock_file.fd)
            self._files.clear()
