"""store.watch(): checkpoints as any process commits them (engine.notify finds them)."""

from __future__ import annotations

import asyncio
import contextlib
import time
import weakref
from collections import deque
from collections.abc import Iterator

from ..errors import NotFound
from ..format.refs import EntryAddress
from ..names import check_name
from .checkpoint import Checkpoint
from .engine_api import RESCAN, EngineAPI, Watcher
from .run import Run


def watch(store: EngineAPI, run: str | None = None, *, timeout: float | None = None) -> Watch:
    return Watch(store, store.watcher(None if run is None else check_name(run, "run")), timeout)


class Watch(Iterator["Checkpoint"]):
    """The iterator store.watch() returns; watching starts when it is made, not at the first next()."""

    def __init__(self, store: EngineAPI, watcher: Watcher, timeout: float | None) -> None:
        self._store = store
        self._watcher = watcher
        self._timeout = timeout
        self._batch: deque[EntryAddress] = deque()
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


class AsyncWatch:
    """What store.awatch() returns: `async for cp in changes`, or `async with store.awatch() as changes`.

    No thread waits on its behalf: between checks it awaits an asyncio.Event that watchdog's hints
    set, or RESCAN seconds (listings are the truth, see the module's note); each check (a listing
    of what changed, then reading the new checkpoints) runs on the store's offload pool. So any
    number of consumers may wait at once, and breaking out of the loop, cancelling the task or
    leaving the `async with` block stops the observer (a dropped, unclosed one is stopped when it
    is collected).
    """

    def __init__(self, store: EngineAPI, run: str | None, timeout: float | None) -> None:
        self._store = store
        self._run = run
        self._timeout = timeout
        self._watcher: Watcher | None = None
        self._woken = asyncio.Event()
        self._batch: deque[Checkpoint] = deque()

    async def start(self) -> None:
        """Start watching now (the first `__anext__` does it otherwise): later commits are all yielded."""
        if self._watcher is not None:
            return
        loop = asyncio.get_running_loop()
        woken = self._woken

        def wake() -> None:
            with contextlib.suppress(RuntimeError):  # hazard: the loop closed while the observer still ran; nobody waits
                loop.call_soon_threadsafe(woken.set)

        store, run = self._store, self._run
        # cancelled meanwhile: the new watcher's observer thread would run forever unless closed
        self._watcher = await store.offload.call_or_undo(lambda: store.watcher(run, wake), Watcher.close)
        weakref.finalize(self, self._watcher.close)  # dropped without aclose(): still stop the observer

    def __aiter__(self) -> AsyncWatch:
        return self

    async def __anext__(self) -> Checkpoint:
        await self.start()
        watcher = self._watcher
        assert watcher is not None
        deadline = None if self._timeout is None else time.monotonic() + self._timeout
        while not self._batch:
            self._woken.clear()  # before the check: a hint that arrives meanwhile sets it again
            fresh = await self._store.offload(self._check, watcher)
            if fresh is None:
                raise StopAsyncIteration
            self._batch.extend(fresh)
            left = RESCAN if deadline is None else min(RESCAN, deadline - time.monotonic())
            if fresh:
                break
            if left <= 0:
                await self.aclose()
                raise StopAsyncIteration
            with contextlib.suppress(asyncio.TimeoutError):  # the periodic listing is due
                await asyncio.wait_for(self._woken.wait(), left)
        return self._batch.popleft()

    def _check(self, watcher: Watcher) -> list[Checkpoint] | None:
        """The checkpoints committed since the last check (None once closed); blocks, so run off the loop."""
        if watcher.closed:
            return None
        found = []
        for run, checkpoint_id in watcher.new(timeout=0) or []:
            try:
                found.append(Run(self._store, run).get(checkpoint_id))
            except NotFound:
                continue  # pruned again since it was listed
        return found

    async def aclose(self) -> None:
        """Stop watching; the iterator then ends."""
        self._batch.clear()
        self._woken.set()  # a consumer waiting in __anext__ checks at once and ends
        if self._watcher is not None:
            await self._store.offload(self._watcher.close)

    async def __aenter__(self) -> AsyncWatch:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
