"""The sync daemon: watchdog events wake the pusher; periodic rescans make it correct without them.

inotify drops events when its queue overflows and can miss files in a directory made a moment
earlier, so events are only hints: every cycle pushes whatever the store holds that the remote lacks.
With `on_commit`, it also runs a command once per local commit (hooks.py).
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

from watchdog.events import FileSystemEvent, FileSystemEventHandler

from ..engine.notify import observe
from ..engine.repository import Repository
from ..format.refs import EntryAddress
from ..redaction import Redactor, redact_url
from .hooks import CommitHook
from .pack_remote import PackRemote
from .push import Pusher, lag_seconds, local_records
from .reconcile import recheck
from .remote import remote_name

log = logging.getLogger("agentfs.sync")
WAKING_EVENTS = {"created", "moved", "closed", "modified"}  # modified: an append to a segment
FLUSH_SLICE = 0.5  # seconds: aflush() holds an offload thread at most this long at a time
RECONCILE_INTERVAL = 3600.0  # seconds between listings of the remote (bounded: one listing of runs/ and objects/)
EXIT_TIMEOUT = 10.0  # seconds leaving a `with store.sync(url):` block gives the push of what is committed


class _Wake(FileSystemEventHandler):
    def __init__(self, event: threading.Event) -> None:
        self.event = event

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.event_type in WAKING_EVENTS:  # our own reads open and close entries: no wake-up loop
            self.event.set()


class SyncDaemon:
    """Pushes every commit of `store` to `url` from a background thread; never blocks a commit."""

    def __init__(
        self,
        store: Repository,
        url: str,
        storage_options: dict[str, Any],
        *,
        interval: float = 30.0,
        workers: int = 16,
        debounce: float = 0.02,
        max_backoff: float = 30.0,
        watch: bool = True,
        on_commit: str | None = None,
        reconcile_interval: float = RECONCILE_INTERVAL,
        exit_timeout: float = EXIT_TIMEOUT,
    ) -> None:
        self.store = store
        self.url = redact_url(url)
        self.redactor = Redactor(url, storage_options)
        self._url = url
        self._storage_options = storage_options
        self.interval = interval
        self.workers = workers
        self.debounce = debounce
        self.max_backoff = max_backoff
        self.exit_timeout = exit_timeout  # leaving a `with` block pushes what is committed for this long
        self.watch = watch
        # every `reconcile_interval` seconds a cycle lists the remote and re-pushes what it lost (reconcile.py)
        self.reconcile_interval = reconcile_interval
        self._next_reconcile = time.monotonic() + reconcile_interval
        self.last_reconciliation: dict[str, Any] | None = None
        self.pusher: Pusher | None = None
        self.last_push: float | None = None
        self.last_error: str | None = None
        self.consecutive_errors = 0
        self.pushed_entries = 0
        self.uploaded_objects = 0
        self._wake = threading.Event()
        # set by flush() and stop(): cuts a retry backoff short (commits only set _wake, so an
        # outage is not hammered once per commit)
        self._urgent = threading.Event()
        self._halt = threading.Event()
        self._cycle = threading.Condition()
        self._thread: threading.Thread | None = None
        self._observer: Any = None
        # fires on local commits from a thread of its own: a remote outage never delays it
        self.hook = None if on_commit is None else CommitHook(store, on_commit, store.remote_state_dir(remote_name(url)))

    def start(self) -> SyncDaemon:
        if self.hook is not None:
            self.hook.start()
        self._thread = threading.Thread(target=self._loop, name="agentfs-sync", daemon=True)
        self._thread.start()
        if self.watch:
            self._observer = observe(self.store.watched_dir(), _Wake(self._wake))
        return self

    def __enter__(self) -> SyncDaemon:
        return self

    def __exit__(self, *exc: object) -> None:
        if not self.stop(self.exit_timeout):
            self._warn_unpushed()

    def _loop(self) -> None:
        backoff = 0.0
        while not self._halt.is_set():
            self._wake.clear()
            try:
                if self.pusher is None:  # kept even if the remote is down: its index is where status goes
                    self.pusher = Pusher(self.store, PackRemote(self._url, self._storage_options), workers=self.workers)
                self.pusher.connect()  # the first real commit should not also pay for building the client; then a no-op
                if time.monotonic() >= self._next_reconcile:
                    reconciliation = recheck(self.pusher, stop=self._halt)
                    self._next_reconcile = time.monotonic() + self.reconcile_interval
                    self.last_reconciliation = reconciliation.summary()
                    stats = reconciliation.pushed
                else:
                    stats = self.pusher.push(stop=self._halt)
                self.pushed_entries += stats.entries
                self.uploaded_objects += stats.objects
                if stats.entries or self.last_push is None:
                    self.last_push = time.time()
                self.last_error = f"refused {len(stats.refused)} corrupt records: {stats.refused[0]}"[:500] if stats.refused else None
                if stats.refused:
                    log.error("agentfs sync to %s: %s", self.url, "; ".join(stats.refused))
                for run, heads in stats.diverged.items():
                    log.warning("agentfs sync to %s: run %s has diverged: %d heads %s", self.url, run, len(heads), ", ".join(heads))
                self.consecutive_errors = 0
                backoff = 0.0
            except Exception as exc:  # a remote fault must never kill the daemon: retry with backoff
                self.consecutive_errors += 1
                self.last_error = self.redactor.text(f"{type(exc).__name__}: {exc}")[:500]
                backoff = min(max(backoff * 2, 0.25), self.max_backoff)
                log.warning(
                    "agentfs sync to %s failed (attempt %d, retry in %.1fs): %s",
                    self.url,
                    self.consecutive_errors,
                    backoff,
                    self.last_error,
                )
            self._publish_status()
            with self._cycle:
                self._cycle.notify_all()
            if backoff:
                self._urgent.wait(backoff)
                self._urgent.clear()
                continue
            until_reconcile = max(0.0, self._next_reconcile - time.monotonic())
            if self._wake.wait(min(self.interval, until_reconcile)) and self.debounce:
                self._halt.wait(self.debounce)  # let a burst of commits land (time.sleep fails with EINVAL under libfaketime)

    def _publish_status(self) -> None:
        if self.pusher is None:
            return
        try:
            self.pusher.index.write_status(self.status(rescan=False))
        except OSError as exc:
            log.warning("agentfs sync: cannot write status: %s", exc)

    def status(self, rescan: bool = True) -> dict[str, Any]:
        """Last push, lag, errors; `rescan=False` reuses the last push's scan (the daemon's own cycle)."""
        if self.pusher is None:
            pending = []
        elif rescan:
            pending = self.pusher.pending()
        else:
            pending = [loc for loc in self.pusher.last_scan if loc not in self.pusher.index.entries]
        return {
            "url": self.url,
            "last_push": self.last_push,
            "last_error": self.last_error,
            "consecutive_errors": self.consecutive_errors,
            "lag_checkpoints": len(pending),
            "lag_seconds": lag_seconds(pending),
            "running": self._thread is not None and self._thread.is_alive() and not self._halt.is_set(),
            "pushed_entries": self.pushed_entries,
            "uploaded_objects": self.uploaded_objects,
            "last_reconciliation": self.last_reconciliation,
            "updated": time.time(),
        }

    def flush(self, timeout: float | None = 10.0) -> bool:
        """Wait until every checkpoint and journal record written before this call is on the remote; False on timeout."""
        return self._wait_pushed(self._written(), None if timeout is None else time.monotonic() + timeout)

    def _written(self) -> tuple[set[EntryAddress], set[tuple[str, str, str]]]:
        """What flush() waits for: the store's checkpoints and journal records as of now."""
        return set(self.store.local_entries()), set(local_records(self.store))

    def _wait_pushed(self, written: tuple[set[EntryAddress], set[tuple[str, str, str]]], deadline: float | None) -> bool:
        """Whether all of `written` is pushed, waiting until `deadline` (monotonic) or the daemon's thread ends."""
        target, records = written
        self._wake.set()
        self._urgent.set()
        with self._cycle:
            while True:
                if self.pusher is not None and target <= self.pusher.index.entries and records <= self.pusher.index.records:
                    return True
                left = None if deadline is None else deadline - time.monotonic()
                if (left is not None and left <= 0) or self._thread is None or not self._thread.is_alive():
                    return False
                self._wake.set()
                self._cycle.wait(0.5 if left is None else min(left, 0.5))

    def stop(self, timeout: float = 10.0) -> bool:
        """Push what is committed, then stop, all within `timeout` seconds; True if all went up.

        An on-commit command that is running is let finish first, within the same `timeout`.
        """
        deadline = time.monotonic() + timeout

        def left() -> float:
            return max(0.0, deadline - time.monotonic())

        if self.hook is not None:
            self.hook.stop(left())
        drained = self.flush(left()) if self.alive() else False
        self._halt.set()
        self._wake.set()
        self._urgent.set()
        if self._observer is not None:
            self._observer.stop()
            self._observer.join(timeout=left())
        if self._thread is not None:
            self._thread.join(timeout=left())
        self._publish_status()
        return drained

    def _warn_unpushed(self) -> None:
        """One warning when leaving a `with` block leaves commits behind (over an unreachable remote it would
        otherwise end silently): how many, and the last error (tests/cli/test_first_use.py). `stop()` returns False instead."""
        if self.pusher is not None:
            checkpoints, records = len(self.pusher.pending()), len(self.pusher.pending_records())
        else:  # the remote could not even be opened: nothing here is known to be on it
            checkpoints, records = len(list(self.store.local_entries())), len(local_records(self.store))
        if not checkpoints and not records:
            return
        log.warning(
            "agentfs sync to %s stopped after %gs with %d checkpoints and %d journal/retirement records not pushed; last error: %s",
            self.url,
            self.exit_timeout,
            checkpoints,
            records,
            self.last_error or "none (still pushing when the time ran out)",
        )

    def alive(self) -> bool:
        """Whether the pushing thread still runs (after `stop`: still inside a remote call that has not returned)."""
        return self._thread is not None and self._thread.is_alive()

    # async twins (aio.py): the same calls, run off the event loop

    async def __aenter__(self) -> SyncDaemon:
        """`async with store.async_sync(url) as daemon:` starts the daemon (unless it already runs)."""
        if self._thread is None:
            await self.store.offload(self.start)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if not await self.astop(self.exit_timeout):
            self._warn_unpushed()

    async def aflush(self, timeout: float | None = 10.0) -> bool:
        """flush() for async code; it waits in slices of at most FLUSH_SLICE seconds, so a long wait
        never keeps one of the store's offload threads from other calls for longer."""
        written = await self.store.offload(self._written)
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            end = time.monotonic() + FLUSH_SLICE
            if await self.store.offload(self._wait_pushed, written, end if deadline is None else min(end, deadline)):
                return True
            if (deadline is not None and time.monotonic() >= deadline) or self._thread is None or not self._thread.is_alive():
                return False

    async def astop(self, timeout: float = 10.0) -> bool:
        return await self.store.offload(self.stop, timeout)

    async def astatus(self, rescan: bool = True) -> dict[str, Any]:
        return await self.store.offload(self.status, rescan)
