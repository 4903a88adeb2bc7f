"""A daemon thread that sweeps a store's expired items at an interval until stopped."""

from __future__ import annotations

import concurrent.futures
import logging
import threading
from collections.abc import Callable

from ...errors import AgentFSError

logger = logging.getLogger(__name__)


class Sweeper:
    def __init__(self, sweep: Callable[[], int], what: str) -> None:
        self.sweep = sweep
        self.what = what
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, interval: float) -> concurrent.futures.Future[None]:
        """Call `sweep` every `interval` seconds; the future resolves once stopped, and cancelling it stops the sweeps."""
        done: concurrent.futures.Future[None] = concurrent.futures.Future()
        done.add_done_callback(lambda future: self._stop.set() if future.cancelled() else None)
        if self._thread is not None and self._thread.is_alive():
            return done
        self._stop.clear()

        def sweep_until_stopped() -> None:
            while not self._stop.wait(interval):
                try:
                    swept = self.sweep()
                except AgentFSError:  # an unreadable namespace or one that lost every race: the next round tries again
                    logger.exception("TTL sweep of %s failed", self.what)
                else:
                    logger.debug("TTL sweep of %s deleted %d items", self.what, swept)
            if not done.done():
                done.set_result(None)

        self._thread = threading.Thread(target=sweep_until_stopped, name="agentfs-ttl-sweeper", daemon=True)
        self._thread.start()
        return done

    def stop(self, timeout: float | None = None) -> bool:
        """Stop sweeping; False if a sweep was still running after `timeout` seconds."""
        self._stop.set()
        if self._thread is None:
            return True
        self._thread.join(timeout)
        stopped = not self._thread.is_alive()
        if stopped:
            self._thread = None
        return stopped
