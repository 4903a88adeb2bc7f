"""Planted bugs, and kill points, patched into a workload process only (production code has no hook).

A plant disables one fsync call site of the store: `apply` patches module attributes before the
workload runs (workloads.py calls it when AGENTFS_CRASHSIM_PLANT names a plant). The crash-state
test must report a lost acknowledged call for each one. A kill point SIGKILLs the process at the
instant before one fsync, so that a later process finds exactly what was left unsynced.
"""

from __future__ import annotations

import itertools
import os
import signal
from collections.abc import Callable

from agentfs.engine import repository, sealing, segment_writer

ENV = "AGENTFS_CRASHSIM_PLANT"


def _skip_fdatasync() -> None:
    os.fdatasync = lambda fd: None


def _skip_segment_dir_fsync() -> None:
    segment_writer.fsync_dir = lambda path: None  # type: ignore[assignment]
    sealing.fsync_dir = lambda path: None  # type: ignore[assignment]  # the seal copy's, which would cover the entry too


def _skip_reuse_sync() -> None:
    repository.Repository.make_durable = lambda self, location: None  # type: ignore[method-assign]


PLANTS: dict[str, Callable[[], None]] = {
    "segment-fdatasync": _skip_fdatasync,  # a commit batch's one fdatasync (and every other)
    "segment-dir-fsync": _skip_segment_dir_fsync,  # segments/, after a new segment's entry
    "reuse-sync": _skip_reuse_sync,  # the sync of another writer's segment before reusing what lies in it
}


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _kill_at_fdatasync(number: int) -> Callable[[], None]:
    def point() -> None:
        fdatasync = os.fdatasync
        calls = itertools.count(1)

        def killing(fd: int) -> None:
            if next(calls) == number:
                _die()
            fdatasync(fd)

        os.fdatasync = killing

    return point


KILL_POINTS: dict[str, Callable[[], None]] = {
    # a commit's batch (its objects and entry) written, not yet fdatasynced
    "batch": _kill_at_fdatasync(1),
    # a call's end record written after its start record (synced), not yet fdatasynced
    "journal": _kill_at_fdatasync(3),
}


def apply(name: str | None) -> None:
    if name is not None:
        PLANTS[name]()
