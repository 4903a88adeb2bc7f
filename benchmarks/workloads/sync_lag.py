"""Workload 5: sync lag against moto S3 at 10 commits/s.

Lag = the moment the moto server finished the PUT of the first head key that
makes a checkpoint reachable (its own, or a later head of the run: a head key
goes up after the packs and indexes it needs, and from then on a reader
resumes from it; the server notes the time itself, so no polling loads it)
minus the moment ``commit`` returned, both wall-clock on this machine. Head
keys are format 2's ``heads/<sha256 of the run name>/<head_name(checkpoint id)>``.

Commits while syncing are compared with the same commits at the same pace with no sync thread, half
before the synced phase and half after it, on a store of their own: a commit paced at 10/s costs
several times one made right after another on this machine (caches and the CPU idle between them),
so the unpaced floor is no peer for it (it read 3.3-4.9x with or without a push in flight).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from agentfs.format import keys

from .. import data
from ..context import Context
from .common import agentfs_part, fig, flush, median, p99, require_sync

W = "5 sync lag"
RUN = "bench/lag"
RATE = 10.0  # commits per second


def paced(commit: Callable[[dict[str, Any]], object], states: list[dict[str, Any]]) -> list[float]:
    """`commit` of each state at RATE per second; each one's latency (ms)."""
    times = []
    nxt = time.perf_counter()
    for state in states:
        time.sleep(max(0.0, nxt - time.perf_counter()))
        t = time.perf_counter()
        commit(state)
        times.append((time.perf_counter() - t) * 1000)
        nxt += 1 / RATE
    return times


def agentfs_side(ctx: Context) -> dict[str, Any]:
    require_sync(ctx)
    af = ctx.agentfs
    assert af is not None
    moto = ctx.moto()
    url = moto.bucket("bench-w5") + "/store"
    store = af.open(ctx.new_dir("w5-agentfs"))
    run = store.run(RUN)
    states = data.states(ctx.sizes.lag_commits, 10_000, seed=5)
    commits: list[tuple[str, float]] = []
    quiet = af.open(ctx.new_dir("w5-agentfs-quiet")).run(RUN)
    quiet_ms = paced(quiet.commit, states[: len(states) // 2])
    with store.sync(url, storage_options=moto.storage_options) as daemon:

        def commit(state: dict[str, Any]) -> None:
            commits.append((run.commit(state).id, time.time()))

        commit_ms = paced(commit, states)
        flush(ctx, W, daemon, ctx.sizes.flush_timeout)
    quiet_ms += paced(quiet.commit, states[len(states) // 2 :])
    head_dir = "/" + "/".join(keys.head_dir_key(RUN)) + "/"
    heads = {keys.head_id_of(key.rsplit("/", 1)[-1]): t for key, t in moto.put_times(head_dir).items()}
    lags = []
    for cp_id, t in commits:
        times = [ts for head, ts in heads.items() if head is not None and head >= cp_id]
        if times:
            lags.append(min(times) - t)
    return {"lags": lags, "missing": len(commits) - len(lags), "commit_ms": commit_ms, "quiet_ms": quiet_ms}


def run(ctx: Context) -> None:
    n = ctx.sizes.lag_commits
    res = agentfs_part(ctx, W, "sync lag", lambda: agentfs_side(ctx))
    lags = res["lags"] if res else []
    if res and res["missing"]:
        ctx.report.note(f"{W}: {res['missing']} of {n} checkpoints never reached the remote")
    note = f"{n} commits at {RATE:.0f}/s; PUT done time from the server"
    fig(
        ctx,
        W,
        "lag commit -> reachable on S3 (head key), median (s)",
        median(lags) if lags else None,
        "goal",
        0.5,
        "<= 0.5 s",
        lambda v: v <= 0.5,
        note,
    )
    fig(ctx, W, "lag commit -> reachable on S3 (head key), p99 (s)", p99(lags) if lags else None, "goal", 2.0, "<= 2 s", lambda v: v <= 2.0)
    if res and res["missing"]:
        fig(ctx, W, "checkpoints never reachable", float(res["missing"]), "goal", 0.0, "0", lambda v: v == 0)
    quiet = median(res["quiet_ms"]) if res else None
    fig(
        ctx,
        W,
        "commit median while syncing (ms)",
        median(res["commit_ms"]) if res else None,
        "same pace, no sync thread",
        quiet,
        "<= 1.5x",
        lambda v: quiet is not None and v <= 1.5 * quiet,
        f"{n} commits at {RATE:.0f}/s with store.sync() running; {n} without, half before and half after",
    )
    floor = ctx.limits.floor()["median_ms"]
    fig(ctx, W, "commit median while syncing (ms)", median(res["commit_ms"]) if res else None, "durable 10 KB file write (floor)", floor)
