"""Hints of change: which checkpoints processes commit, as soon as they land.

watchdog events on runs/ are hints that make the common case fast (a commit is reported within
milliseconds). inotify drops events when its queue overflows and can miss files in a directory made a
moment earlier, so listings are the truth: the watched run, and every run an event mentioned lately,
is listed again every RESCAN seconds; watching every run, the whole store every FULL_RESCAN seconds.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer

from ..errors import InvalidName
from ..format.refs import Location
from ..names import ID, check_name
from .repository import Repository

RESCAN = 0.5
FULL_RESCAN = 3.0
HOT = 3.0  # seconds during which a run an event mentioned is listed every RESCAN

# watchdog 7 noise that says nothing about our data: a warning when a directory is re-watched after
# a burst of creations, and an error logged when its emitter thread is stopped mid-read
warnings.filterwarnings("ignore", message="Callback with id", category=RuntimeWarning, module="watchdog")
logging.getLogger("watchdog.observers.inotify").addFilter(lambda record: "called when the thread is inactive" not in record.getMessage())


def observe(directory: Path, handler: FileSystemEventHandler) -> Any:
    """A started watchdog observer (a daemon thread) sending every event under `directory` to `handler`."""
    observer = Observer()
    observer.schedule(handler, str(directory), recursive=True)
    observer.daemon = True
    observer.start()
    return observer


class _Hints(FileSystemEventHandler):
    def __init__(self, watcher: Watcher) -> None:
        self.watcher = watcher

    def on_any_event(self, event: FileSystemEvent) -> None:
        # an entry is hard-linked in from tmp/ (created); moved covers a rename into a log dir
        if event.event_type == "created":
            self.watcher.hint(os.fsdecode(event.src_path), event.is_directory)
        elif event.event_type == "moved":
            self.watcher.hint(os.fsdecode(event.dest_path), event.is_directory)


class Watcher:
    """Reports each local checkpoint of `run` (default: every run) committed after it started, once."""

    def __init__(self, store: Repository, run: str | None = None, on_hint: Callable[[], None] | None = None) -> None:
        self.store = store
        self.run = run
        self._on_hint = on_hint  # called from watchdog's thread after each hint: wakes an async consumer
        self._lock = threading.Lock()
        self._hints: set[Location] = set()
        self._hot: dict[str, float] = {}  # run -> monotonic time until which it is listed every RESCAN
        self._wake = threading.Event()
        self._closed = False
        self._observer = observe(store.runs_dir, _Hints(self))
        # listed after the observer started: a commit is either in this listing or produces an event
        self.seen: set[Location] = set(self._listing())
        self._next_rescan = time.monotonic() + RESCAN
        self._next_full = time.monotonic() + FULL_RESCAN

    def hint(self, path: str, is_directory: bool) -> None:
        """An event on `path` (under runs/): a new entry, or a directory a run's entries may appear in."""
        parts = Path(os.path.relpath(path, self.store.runs_dir)).parts
        checkpoint_id = None
        if is_directory:
            run_parts = parts[:-1] if parts[-1:] == ("log",) else parts
        elif len(parts) >= 3 and parts[-2] == "log" and ID.fullmatch(parts[-1]):
            run_parts, checkpoint_id = parts[:-2], parts[-1]
        else:
            return
        run = "/".join(run_parts)
        try:
            check_name(run, "run")
        except InvalidName:
            return  # the store's root, a path outside runs/ or a prefix that is not a run name
        if self.run is not None and run != self.run:
            return
        with self._lock:
            if checkpoint_id is not None:
                self._hints.add((run, checkpoint_id))
            self._hot[run] = time.monotonic() + HOT
        self._wake.set()
        if self._on_hint is not None:
            self._on_hint()

    def new(self, timeout: float | None = None) -> list[Location] | None:
        """Checkpoints not reported before, in id order; None after `timeout` seconds without any, or once closed."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self._closed:
            self._wake.clear()  # before collecting: a hint that arrives meanwhile sets it again
            fresh = self._collect()
            if fresh:
                return fresh
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                return None
            pause = self._next_rescan - now if deadline is None else min(self._next_rescan, deadline) - now
            self._wake.wait(max(pause, 0.0))
        return None

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        self._wake.set()
        self._observer.stop()
        self._observer.join(timeout=5)

    def _collect(self) -> list[Location]:
        now = time.monotonic()
        with self._lock:
            found, self._hints = self._hints, set()
            self._hot = {run: until for run, until in self._hot.items() if until > now}
            hot = list(self._hot)
        if now >= self._next_rescan:
            self._next_rescan = now + RESCAN
            if self.run is None and now >= self._next_full:
                self._next_full = now + FULL_RESCAN
                found.update(self._listing())
            else:
                for run in [self.run] if self.run is not None else hot:
                    found.update(self._listed(run))
        fresh = sorted(found - self.seen, key=lambda location: (location[1], location[0]))
        self.seen.update(fresh)
        return fresh

    def _listing(self) -> Iterator[Location]:
        return self.store.local_entries() if self.run is None else self._listed(self.run)

    def _listed(self, run: str) -> Iterator[Location]:
        return ((run, checkpoint_id) for checkpoint_id in self.store.local_ids(run) if ID.fullmatch(checkpoint_id))
