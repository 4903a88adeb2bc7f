"""Workload 5: sync lag against moto S3 at 10 commits/s.

A poller lists the run's log prefix on the remote every 20 ms (one LIST per
poll) and records when each log entry first appears; lag = that moment minus
the moment ``commit`` returned. The log layout is DESIGN.md's
``runs/<run>/log/<id>``; a key counts as the entry of a checkpoint when its
name starts with the checkpoint's id.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from .. import data
from ..context import Context
from .common import agentfs_part, fig, flush, median, p99

W = "5 sync lag"
RUN = "bench/lag"
RATE = 10.0  # commits per second
POLL = 0.02


class LogPoller(threading.Thread):
    """Records when each key under ``prefix`` is first seen."""

    def __init__(self, fs: Any, prefix: str) -> None:
        super().__init__(daemon=True)
        self.fs, self.prefix = fs, prefix
        self.seen: dict[str, float] = {}
        self.stop = threading.Event()
        self.errors = 0

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                self.fs.invalidate_cache()
                names = self.fs.ls(self.prefix, detail=False, refresh=True)
            except FileNotFoundError:
                names = []
            except Exception:  # noqa: BLE001 - keep polling
                self.errors += 1
                names = []
            now = time.perf_counter()
            for name in names:
                self.seen.setdefault(name.rsplit("/", 1)[-1], now)
            time.sleep(POLL)

    def first_seen(self, cp_id: str) -> float | None:
        times = [t for name, t in self.seen.items() if name.startswith(cp_id)]
        return min(times) if times else None


def agentfs_side(ctx: Context) -> dict[str, Any]:
    af = ctx.agentfs
    assert af is not None
    moto = ctx.moto()
    url = moto.bucket("w5") + "/store"
    store = af.open(ctx.new_dir("w5-agentfs"))
    run = store.run(RUN)
    states = data.states(ctx.sizes.lag_commits, 10_000, seed=5)
    poller = LogPoller(moto.fs(), f"{url.removeprefix('s3://')}/runs/{RUN}/log")
    poller.start()
    commits: list[tuple[str, float]] = []
    commit_ms: list[float] = []
    try:
        with store.sync(url, storage_options=moto.storage_options) as daemon:
            nxt = time.perf_counter()
            for s in states:
                time.sleep(max(0.0, nxt - time.perf_counter()))
                t = time.perf_counter()
                cp = run.commit(s)
                done = time.perf_counter()
                commits.append((cp.id, done))
                commit_ms.append((done - t) * 1000)
                nxt += 1 / RATE
            flush(ctx, W, daemon, ctx.sizes.flush_timeout)
        end = time.perf_counter() + 5
        while time.perf_counter() < end and any(poller.first_seen(i) is None for i, _ in commits):
            time.sleep(POLL)
    finally:
        poller.stop.set()
        poller.join()
    lags = []
    for cp_id, t in commits:
        seen = poller.first_seen(cp_id)
        if seen is not None:
            lags.append(seen - t)
    return {"lags": lags, "missing": len(commits) - len(lags), "commit_ms": commit_ms,
            "poll_errors": poller.errors}


def run(ctx: Context) -> None:
    n = ctx.sizes.lag_commits
    res = agentfs_part(ctx, W, "sync lag", lambda: agentfs_side(ctx))
    lags = res["lags"] if res else []
    if res and (res["missing"] or res["poll_errors"]):
        ctx.report.note(f"{W}: {res['missing']} of {n} log entries never seen on the remote; "
                        f"{res['poll_errors']} poll errors")
    note = f"{n} commits at {RATE:.0f}/s; poll every {POLL * 1000:.0f} ms"
    fig(ctx, W, "lag commit -> log entry on S3, median (s)", median(lags) if lags else None,
        "goal", 0.5, "<= 0.5 s", lambda v: v <= 0.5, note)
    fig(ctx, W, "lag commit -> log entry on S3, p99 (s)", p99(lags) if lags else None,
        "goal", 2.0, "<= 2 s", lambda v: v <= 2.0)
    if res and res["missing"]:
        fig(ctx, W, "log entries never seen", float(res["missing"]), "goal", 0.0,
            "0", lambda v: v == 0)
    floor = ctx.limits.floor()["median_ms"]
    fig(ctx, W, "commit median while syncing (ms)",
        median(res["commit_ms"]) if res else None, "durable 10 KB file write (floor)", floor,
        "<= 1.5x floor", lambda v: v <= 1.5 * floor)
