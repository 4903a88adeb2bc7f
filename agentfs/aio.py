"""Async support: the blocking calls of one store run off the event loop, on a bounded pool of threads.

Every `a`-prefixed method (`run.acommit`, `cp.astate`, `store.awatch`, ...) awaits its blocking twin
through the store's Offloader: at most `workers` of them run at once per store, the rest wait their
turn in order, and no thread is created per call. The event loop only waits; it never reads, hashes,
compresses or fsyncs.

Hazard: a call handed to a thread cannot be stopped. Cancelling the awaiting task raises
CancelledError at once, but a call that had already started runs to its end (a commit is then
committed); one still waiting for a thread is dropped and never runs.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import ParamSpec, TypeVar

WORKERS = 4  # blocking calls of one store running at once; each uses the store's own I/O pool too
P = ParamSpec("P")
T = TypeVar("T")


class Offloader:
    """A store's bounded pool for blocking calls made from async code; threads start on first use."""

    def __init__(self, workers: int = WORKERS) -> None:
        if workers < 1:
            raise ValueError(f"workers must be at least 1, got {workers}")
        self.workers = workers
        self._lock = threading.Lock()
        self._executor: ThreadPoolExecutor | None = None

    async def __call__(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        """`fn(*args, **kwargs)` on one of the pool's threads, seeing the caller's context variables."""
        call = functools.partial(contextvars.copy_context().run, fn, *args, **kwargs)
        return await asyncio.get_running_loop().run_in_executor(self._pool(), call)

    async def call_or_undo(self, fn: Callable[[], T], undo: Callable[[T], object]) -> T:
        """`fn()` off the loop, for a call whose result must not be dropped (a started observer, a journal start).

        If the awaiting task is cancelled once `fn` has started, `fn` runs to its end and `undo` gets its
        result; cancelled before it started, `fn` never runs.
        """
        future = self._pool().submit(contextvars.copy_context().run, fn)
        try:
            return await asyncio.wrap_future(future)  # cancelling this cancels `future` unless it is running
        except asyncio.CancelledError:
            future.add_done_callback(functools.partial(_undo, undo))
            raise

    async def to_end(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        """`fn(*args, **kwargs)` off the loop, for a change whose caller must not hear of a cancellation while the
        change may still land: cancelled before `fn` started, it never runs; once started, the CancelledError
        reaches the awaiting task when `fn` has ended (cancellations meanwhile are folded into it). One hop: no
        task is made per call (tests/integrations/test_openai_agents.py, the cancelled changes)."""
        job = self._pool().submit(functools.partial(contextvars.copy_context().run, fn, *args, **kwargs))
        try:
            return await asyncio.wrap_future(job)
        except asyncio.CancelledError:
            if job.cancel():  # still waiting for a thread: dropped
                raise
            while not job.done():
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.wait([asyncio.wrap_future(job)])
            raise

    def _pool(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._executor is None:
                self._executor = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="agentfs-async")
            return self._executor

    def close(self) -> None:
        """Wait for the calls already handed over, then stop the threads (a later call starts new ones)."""
        with self._lock:
            executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True)


def _undo(undo: Callable[[T], object], future: Future[T]) -> None:
    # Runs on the pool thread that finishes `future`; if it had finished just before the cancellation
    # arrived, at once on the loop's thread (one short blocking call, only in that race).
    if not future.cancelled() and future.exception() is None:
        undo(future.result())
