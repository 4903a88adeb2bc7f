"""Hints of change: which checkpoints processes commit, as soon as they land.

watchdog events on segments/ (an append modifies a segment file) are hints that make the common case
fast: a commit is reported within milliseconds. inotify drops events when its queue overflows, so the
index is the truth: it is refreshed (reading only new batches) after each hint, and every RESCAN
seconds without one, and says what it added since the last look (engine/entry_log.py), so a check
costs what is new, not the store's history.
"""

from __future__ import annotations

import logging
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer

from ..format.refs import EntryAddress
from .segment_store import SegmentStore

RESCAN = 0.5

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
        # an append modifies a segment; a roll or a compaction creates one
        if event.event_type in ("created", "modified", "moved") and not event.is_directory:
            self.watcher.hint()


class Watcher:
    """Reports each local checkpoint of `run` (default: every run) committed after it started, once."""

    def __init__(self, store: SegmentStore, run: str | None = None, on_hint: Callable[[], None] | None = None) -> None:
        self.store = store
        self.run = run
        self._on_hint = on_hint  # called from watchdog's thread after each hint: wakes an async consumer
        self._lock = threading.Lock()
        self._hinted = False
        self._wake = threading.Event()
        self._closed = False
        self._observer = observe(store.segments_dir, _Hints(self))
        # followed, then listed, after the observer started: a commit is in this listing or in what the
        # log gives later (`seen` drops it there) and produces an event
        self._following = store.index.entry_log.follow()
        self.seen: set[EntryAddress] = set(self._listing())
        self._next_rescan = time.monotonic() + RESCAN

    def hint(self) -> None:
        """An event under segments/: something was appended; the index says what."""
        with self._lock:
            self._hinted = True
        self._wake.set()
        if self._on_hint is not None:
            self._on_hint()

    def new(self, timeout: float | None = None) -> list[EntryAddress] | None:
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
        self.store.index.entry_log.unfollow(self._following)
        self._observer.stop()
        self._observer.join(timeout=5)

    def _collect(self) -> list[EntryAddress]:
        now = time.monotonic()
        with self._lock:
            hinted, self._hinted = self._hinted, False
        if not hinted and now < self._next_rescan:
            return []
        self._next_rescan = now + RESCAN
        self.store.index.refresh()
        added = self.store.index.entry_log.take(self._following)
        if added is None:  # the index was rebuilt (a compaction): list everything once
            added = list(self._listing())
        elif self.run is not None:
            added = [location for location in added if location[0] == self.run]
        fresh = sorted(set(added) - self.seen, key=lambda location: (location[1], location[0]))
        self.seen.update(fresh)
        return fresh

    def _listing(self) -> Iterator[EntryAddress]:
        return self.store.local_entries() if self.run is None else self._listed(self.run)

    def _listed(self, run: str) -> Iterator[EntryAddress]:
        return ((run, checkpoint_id) for checkpoint_id in self.store.local_ids(run))
