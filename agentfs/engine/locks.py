"""flock(2) locks on files under locks/.

The lock file stays after release: unlinking a held lock splits waiters across inodes.
Each holder opens its own descriptor: flock belongs to the open file description, so two
threads sharing one descriptor would release each other's lock.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
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
