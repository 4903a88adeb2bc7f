"""store.watch(): checkpoints as any process commits them (engine.notify finds them)."""

from __future__ import annotations

import weakref
from collections import deque
from collections.abc import Iterator

from ..engine.notify import Watcher
from ..engine.repository import Repository
from ..errors import NotFound
from ..format.refs import Location
from ..names import check_name
from .checkpoint import Checkpoint
from .run import Run


def watch(store: Repository, run: str | None = None, *, timeout: float | None = None) -> Watch:
    return Watch(store, Watcher(store, None if run is None else check_name(run, "run")), timeout)


class Watch(Iterator["Checkpoint"]):
    """The iterator store.watch() returns; watching starts when it is made, not at the first next()."""

    def __init__(self, store: Repository, watcher: Watcher, timeout: float | None) -> None:
        self._store = store
        self._watcher = watcher
        self._timeout = timeout
        self._batch: deque[Location] = deque()
        weakref.finalize(self, watcher.close)  # dropped without close(): still stop the observer

    def __next__(self) -> Checkpoint:
        while True:
            if not self._batch:
                batch = self._watcher.new(self._timeout)
                if batch is None:
                    self.close()
                    raise StopIteration
                self._batch.extend(batch)
            run, checkpoint_id = self._batch.popleft()
            try:
                return Run(self._store, run).get(checkpoint_id)
            except NotFound:
                continue  # pruned again since it was listed

    def close(self) -> None:
        """Stop watching; next() then raises StopIteration."""
        self._batch.clear()
        self._watcher.close()

    def __enter__(self) -> Watch:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
