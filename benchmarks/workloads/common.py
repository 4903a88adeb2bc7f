"""Helpers shared by the workloads."""

from __future__ import annotations

import statistics
import time
import traceback
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from ..context import Context
from ..limits import percentile
from ..peers import Peer, open_peers
from ..report import Figure

T = TypeVar("T")


def agentfs_part(ctx: Context, workload: str, what: str, fn: Callable[[], T]) -> T | None:
    """Run the agentfs side of a workload; None (and a note) if it cannot run."""
    if ctx.agentfs is None:
        return None
    try:
        return fn()
    except Exception as exc:  # noqa: BLE001 - a failure is reported, never hidden
        traceback.print_exc()
        ctx.report.note(f"{workload}: agentfs {what} failed: {type(exc).__name__}: {exc}")
        return None


def timed(fn: Callable[[Any], object], items: Iterable[Any]) -> list[float]:
    """Call ``fn`` on each item; the latency of each call in ms."""
    out = []
    for item in items:
        t = time.perf_counter()
        fn(item)
        out.append((time.perf_counter() - t) * 1000)
    return out


def median(values: list[float]) -> float:
    return statistics.median(values)


def p99(values: list[float]) -> float:
    return percentile(values, 99)


def fig(
    ctx: Context,
    workload: str,
    metric: str,
    agentfs: float | None,
    peer: str = "",
    peer_value: float | None = None,
    goal: str = "",
    met: Callable[[float], bool] | None = None,
    note: str = "",
) -> Figure:
    """Add a figure; ``met(agentfs_value)`` decides the goal when agentfs ran."""
    goal_met = met(agentfs) if (met is not None and agentfs is not None) else None
    return ctx.report.add(Figure(workload, metric, agentfs, peer, peer_value, goal,
                                 goal_met, note))


def with_peers(ctx: Context, name: str) -> list[Peer]:
    """Fresh peers for one workload; the ones that cannot run are noted."""
    peers, missing = open_peers(ctx.new_dir(f"{name}-peers"))
    for peer, why in missing.items():
        ctx.report.note(f"{name}: peer {peer} cannot run here: {why}")
    return peers


def mb(nbytes: float) -> float:
    return nbytes / 1_000_000


def flush(ctx: Context, workload: str, daemon: Any, timeout: float) -> bool:
    """``daemon.flush(timeout)``; False (and a note) if it failed or timed out.

    A flush that returns False is taken as a time-out; None or True as done.
    """
    try:
        done = daemon.flush(timeout=timeout)
    except Exception as exc:  # noqa: BLE001 - reported, never hidden
        ctx.report.note(f"{workload}: flush failed: {type(exc).__name__}: {exc}")
        return False
    if done is False:
        ctx.report.note(f"{workload}: flush did not finish within {timeout:.0f} s")
        return False
    return True
