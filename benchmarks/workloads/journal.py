"""Workload 10: the tool-call journal.

A journaled call is two durable records (start before the tool runs, end after), so its floor is
two durable small-file writes. The peer is Turso's AgentFS tool-call audit trail
(``tools.start`` + ``tools.success``, one SQLite transaction each), which records calls but has
no idempotent replay; agentfs's replay (`once` on a key that already succeeded) is measured too.
"""

from __future__ import annotations

import asyncio
from typing import Any

from ..context import Context
from .common import agentfs_part, fig, median, p99, timed

W = "10 tool-call journal"


def result(i: int) -> dict[str, Any]:
    return {"i": i, "rows": [{"id": j, "title": f"result {i}.{j}"} for j in range(5)]}


def agentfs_calls(ctx: Context, n: int) -> tuple[list[float], list[float]]:
    """Latencies (ms) of `once` on n new keys, then of `once` replaying each of them."""
    af = ctx.agentfs
    assert af is not None
    run = af.open(ctx.new_dir("w10-agentfs")).run("bench/tools")
    run.once("warm", result, -1)
    fresh = timed(lambda i: run.once(f"search:{i}", result, i), range(n))
    replay = timed(lambda i: run.once(f"search:{i}", _must_not_run), range(n))
    assert run.once(f"search:{n - 1}", _must_not_run) == result(n - 1)
    return fresh, replay


def _must_not_run(*_args: Any) -> Any:
    raise AssertionError("a journaled call ran twice")


def turso_calls(ctx: Context, n: int) -> list[float] | None:
    try:
        from agentfs_sdk import AgentFS, AgentFSOptions
    except ImportError as exc:
        ctx.report.note(f"{W}: peer Turso agentfs-sdk cannot run here: {exc}")
        return None
    loop = asyncio.new_event_loop()
    agent = loop.run_until_complete(AgentFS.open(AgentFSOptions(path=str(ctx.new_dir("w10-turso") / "agent.db"))))

    def call(i: int) -> None:
        call_id = loop.run_until_complete(agent.tools.start("search", {"i": i}))
        loop.run_until_complete(agent.tools.success(call_id, result(i)))

    try:
        call(-1)
        return timed(call, range(n))
    finally:
        loop.run_until_complete(agent.close())
        loop.close()


def run(ctx: Context) -> None:
    n = ctx.sizes.small_commits
    floor = ctx.limits.floor()
    measured = agentfs_part(ctx, W, "once", lambda: agentfs_calls(ctx, n))
    fresh, replay = measured if measured is not None else (None, None)
    two_writes = 2 * floor["median_ms"]
    fig(
        ctx,
        W,
        f"journaled call median (ms), once(), n={n}",
        median(fresh) if fresh else None,
        "2 durable small-file writes (floor)",
        two_writes,
        "<= 1.5x floor",
        lambda v: v <= 1.5 * two_writes,
    )
    fig(ctx, W, "journaled call p99 (ms)", p99(fresh) if fresh else None, "floor p99 x2", 2 * floor["p99_ms"])
    fig(ctx, W, "replay median (ms): once() on a key that succeeded", median(replay) if replay else None, note="no write, no call")
    peer = turso_calls(ctx, n)
    if peer is not None:
        fig(
            ctx,
            W,
            "journaled call median (ms) vs start+success",
            median(fresh) if fresh else None,
            "Turso agentfs-sdk tools",
            median(peer),
            "faster (< 1x)",
            lambda v: v < median(peer),
            "both durable (fsync); Turso records only, no replay",
        )
