"""Helpers shared by the workloads."""

from __future__ import annotations

import contextlib
import gc
import json
import statistics
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from ..context import Context
from ..limits import percentile
from ..peers import Peer, open_peers
from ..report import NOT_AVAILABLE, Figure

FAILED = "failed (see notes)"
REPO = Path(__file__).resolve().parents[2]

T = TypeVar("T")


def agentfs_part(ctx: Context, workload: str, what: str, fn: Callable[[], T]) -> T | None:
    """Run the agentfs side of a workload; None (and a note) if it cannot run."""
    if ctx.agentfs is None:
        return None
    try:
        return fn()
    except SyncSkipped as exc:
        ctx.report.note(f"{workload}: agentfs {what}: {exc}")
        return None
    except Exception as exc:
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


def in_turn(turn: int, items: list[T]) -> list[T]:
    """`items` starting from the one at `turn` (modulo their number): called in this order at each turn, each item
    goes first as often as the others. With two items what ran just before each call (leaving the machine warm or
    cold) alternates alike for both; with more, a rotation keeps each item's predecessor (workload 9 shuffles)."""
    start = turn % len(items)
    return items[start:] + items[:start]


@contextlib.contextmanager
def heap_frozen() -> Iterator[None]:
    """Within it, the collector leaves alone what was alive on entry (``gc.freeze``): the benchmark's own heap and
    what earlier workloads left. Why: a collection of the oldest generation scans every tracked object, and the
    allocation that triggers it falls on one side of a lockstep at random. In a full run one such collection
    took 64 ms on one step of the encrypted conversation's 1,000 (its whole run 1.02 s): 1.12x plaintext with it,
    1.06x without that step. The sides' own garbage is still collected as the run goes."""
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def lockstep(calls: dict[str, Callable[[Any], object]], items: Iterable[Any]) -> dict[str, list[float]]:
    """Each item to every call in turn, the order rotated at every item (``in_turn``); each call's latencies in ms,
    the heap made before the loop frozen (``heap_frozen``)."""
    times: dict[str, list[float]] = {name: [] for name in calls}
    with heap_frozen():
        for turn, item in enumerate(items):
            for name in in_turn(turn, list(calls)):
                t = time.perf_counter()
                calls[name](item)
                times[name].append((time.perf_counter() - t) * 1000)
    return times


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
    status = NOT_AVAILABLE if ctx.agentfs is None else FAILED
    figure = Figure(workload, metric, agentfs, peer, peer_value, goal, goal_met, note, agentfs_status=status)
    return ctx.report.add(figure)


def at_most(
    ctx: Context, workload: str, metric: str, agentfs: float | None, peer: str, peer_value: float | None, factor: float, note: str = ""
) -> Figure:
    """A figure whose goal is agentfs <= ``factor`` x the compared value (both from this run)."""

    def met(v: float) -> bool:
        return peer_value is not None and v <= factor * peer_value

    return fig(ctx, workload, metric, agentfs, peer, peer_value, f"<= {factor:g}x", met if peer_value is not None else None, note)


def read_through(artifact: Any) -> int:
    """Stream an artifact to its end in 1 MiB reads, as a reader would; the bytes read."""
    got = 0
    with artifact.open() as f:
        while chunk := f.read(1 << 20):
            got += len(chunk)
    return got


def child_json(args: list[str], timeout: float) -> dict[str, Any]:
    """Run ``python ARGS`` from the repository root; the JSON object on its last stdout line."""
    out = subprocess.run([sys.executable, *args], cwd=REPO, capture_output=True, text=True, timeout=timeout)
    if out.returncode != 0:
        raise RuntimeError(f"child exited {out.returncode}: {out.stderr.strip()[-2000:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


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
    A failed flush marks sync as broken for the rest of the run (see
    ``require_sync``), so that a broken daemon costs one time-out, not one
    per workload.
    """
    try:
        done = daemon.flush(timeout=timeout)
    except Exception as exc:  # reported, never hidden
        why = f"flush failed: {type(exc).__name__}: {exc}"
    else:
        if done is not False:
            return True
        why = f"flush did not finish within {timeout:.0f} s"
    ctx.report.note(f"{workload}: {why}")
    ctx.sync_broken = f"{workload}: {why}"
    return False


class SyncSkipped(RuntimeError):
    """A sync figure not measured because an earlier flush failed."""


def require_sync(ctx: Context) -> None:
    """Raise if an earlier flush failed: the sync figures that follow are skipped."""
    if ctx.sync_broken:
        raise SyncSkipped(f"skipped, sync failed earlier ({ctx.sync_broken})")
