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
from pathlib import Path

from agentfs import fsutil
from agentfs.engine import objectdb as db

ENV = "AGENTFS_CRASHSIM_PLANT"


def _skip_object_file_fsync() -> None:
    write_temp = db.write_temp

    def unsynced(tmp_dir: Path, data: bytes | memoryview, *, sync: bool) -> Path:
        return write_temp(tmp_dir, data, sync=False)

    db.write_temp = unsynced  # type: ignore[assignment]


def _skip_dir_fsync(name: str) -> Callable[[], None]:
    def plant() -> None:
        fsync_dir = fsutil.fsync_dir

        def selective(path: Path) -> None:
            if path.name != name:
                fsync_dir(path)

        fsutil.fsync_dir = selective  # type: ignore[assignment]

    return plant


def _skip_object_dir_fsync() -> None:
    db.fsync_dir = lambda path: None  # type: ignore[assignment]


PLANTS: dict[str, Callable[[], None]] = {
    "object-file-fsync": _skip_object_file_fsync,  # an object's bytes, before its rename
    "object-dir-fsync": _skip_object_dir_fsync,  # the fan-out directories, before the log entry
    "log-dir-fsync": _skip_dir_fsync("log"),  # runs/<run>/log, after a new entry is linked in
    "journal-dir-fsync": _skip_dir_fsync("journal"),  # runs/<run>/journal, after a record is linked in
}


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _kill_before(condition: Callable[[Path], bool]) -> Callable[[], None]:
    def point() -> None:
        fsync_dir = fsutil.fsync_dir

        def killing(path: Path) -> None:
            if condition(path):
                _die()
            fsync_dir(path)

        fsutil.fsync_dir = killing  # type: ignore[assignment]

    return point


def _kill_before_object_dir_fsync() -> None:
    db.fsync_dir = lambda path: _die()  # type: ignore[assignment]


_journal_syncs = itertools.count(1)
KILL_POINTS: dict[str, Callable[[], None]] = {
    # a commit's objects renamed into place, their directories not yet synced
    "objects": _kill_before_object_dir_fsync,
    # runs/<run>/log just made, its parent not yet synced
    "mkdir": _kill_before(lambda path: (path / "log").is_dir() and path.parent.name != "runs"),
    # a log entry linked into runs/<run>/log, the directory not yet synced: the next commit borrows from it
    "entry": _kill_before(lambda path: path.name == "log"),
    # a call's end record linked into the journal, the journal directory not yet synced (its start was)
    "journal": _kill_before(lambda path: path.name == "journal" and next(_journal_syncs) == 2),
}


def apply(name: str | None) -> None:
    if name is not None:
        PLANTS[name]()
