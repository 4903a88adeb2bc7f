"""Workload 12 (issue 10): costs that must not grow with history.

(a) Durable commits (default durability, 10 KB states) on a run of
``history_long`` checkpoints and on a run of ``history_short``, alternated
commit by commit so that both see the same machine; the figure is the ratio
of the medians. (b) ``agentfs.open`` + ``latest()`` in a fresh process (which
imports agentfs before the clock starts) on a store of ONE run of ``open_long``
checkpoints and on one of ``open_short``, that run's ``latest()``;
``open_rounds`` processes each, alternated; ratio of the medians. Both page
caches are warm (the stores were just built and closed), as for an agent
restarted on its own machine after a clean exit: the long run's segment is
sealed, so the open reads its footer; the short one's (under 1 MiB) is
scanned. An unsealed segment (a killed writer's) is scanned whole: at most one
segment per writer slot (64 MiB), whatever the history.

The histories are built through the public API with ``durability="process"``
commits of small, new states (setup only; not timed): one run of 100,000 takes
~20 s on format 2 (format 1, which listed the run's log at every commit, needed
many shorter runs instead).
"""

from __future__ import annotations

import random
import time
from pathlib import Path

from .. import data
from ..context import Context
from .common import agentfs_part, at_most, child_json, median, timed

W = "12 history"
COMMIT_GOAL = 1.2  # issue 10: commit on a 10,000-checkpoint run <= 1.2x on a 100-checkpoint run
OPEN_GOAL = 3.0  # issue 10: open + latest() at 100,000 checkpoints <= 3x at 1,000

# The child: agentfs is imported before the clock starts; it prints the ms of open + latest().
_CHILD = """
import json, sys, time
import agentfs

store_dir, run, step = sys.argv[1], sys.argv[2], int(sys.argv[3])
t = time.perf_counter()
cp = agentfs.open(store_dir).run(run).latest()
ms = (time.perf_counter() - t) * 1000
assert cp is not None and cp.state["step"] == step, f"latest() is not step {step}"
print(json.dumps({"ms": ms}))
"""


def build(ctx: Context, name: str, runs: int, per_run: int) -> Path:
    """A store of ``runs`` runs (``run_name(0)``, ...) of ``per_run`` small, distinct states each."""
    af = ctx.agentfs
    assert af is not None
    path = ctx.new_dir(name)
    rng = random.Random(runs * per_run)
    t = time.perf_counter()
    with af.open(path, durability="process") as store:  # closed, as by an agent that exited: a segment over 1 MiB is sealed
        for r in range(runs):
            run = store.run(run_name(r))
            for i in range(per_run):
                run.commit({"step": i, "notes": rng.randbytes(100).hex()})
    print(f"  (built {runs:,} x {per_run:,} checkpoints in {time.perf_counter() - t:.1f} s)", flush=True)
    return path


def run_name(r: int) -> str:
    return f"bench/run-{r:04d}"


def commit_costs(ctx: Context) -> dict[str, float]:
    """Median durable commit (ms) on the short and on the long run, alternated."""
    af = ctx.agentfs
    assert af is not None
    n = ctx.sizes.small_commits
    runs = {
        "short": af.open(build(ctx, "w12-short", 1, ctx.sizes.history_short)).run(run_name(0)),
        "long": af.open(build(ctx, "w12-long", 1, ctx.sizes.history_long)).run(run_name(0)),
    }
    states = data.states(n + 1, 10_000, seed=12)
    times: dict[str, list[float]] = {k: [] for k in runs}
    for run in runs.values():  # warm-up, not timed
        run.commit(states[0])
    for state in states[1:]:
        for kind, run in runs.items():
            times[kind] += timed(run.commit, [state])
    return {kind: median(t) for kind, t in times.items()}


def open_latest_ms(store: Path, step: int) -> float:
    """ms of ``agentfs.open`` + ``latest()`` of the store's first run in a fresh process (imports not counted)."""
    ms: float = child_json(["-c", _CHILD, str(store), run_name(0), str(step)], timeout=300)["ms"]
    return ms


def open_costs(ctx: Context) -> dict[str, float]:
    """Median open + latest() (ms) in the small and in the large store, alternated."""
    sizes = {"short": ctx.sizes.open_short, "long": ctx.sizes.open_long}
    stores = {kind: build(ctx, f"w12-open-{kind}", 1, n) for kind, n in sizes.items()}
    times: dict[str, list[float]] = {kind: [] for kind in stores}
    for _ in range(ctx.sizes.open_rounds):
        for kind, store in stores.items():
            times[kind].append(open_latest_ms(store, sizes[kind] - 1))
    return {kind: median(t) for kind, t in times.items()}


def run(ctx: Context) -> None:
    s = ctx.sizes
    commit = agentfs_part(ctx, W, "commits on a short and a long run", lambda: commit_costs(ctx))
    at_most(
        ctx,
        W,
        f"commit median, fsync, run of {s.history_long:,} checkpoints (ms)",
        commit["long"] if commit else None,
        f"same, run of {s.history_short:,}",
        commit["short"] if commit else None,
        COMMIT_GOAL,
        f"{s.small_commits} commits of 10 KB each, alternated between the two stores",
    )
    opened = agentfs_part(ctx, W, "open + latest() in a fresh process", lambda: open_costs(ctx))
    at_most(
        ctx,
        W,
        f"open + latest(), fresh process, {s.open_long:,} checkpoints (ms)",
        opened["long"] if opened else None,
        f"same at {s.open_short:,}",
        opened["short"] if opened else None,
        OPEN_GOAL,
        f"one run each; median of {s.open_rounds} processes each, alternated; "
        "imports not timed; warm page cache" + ("; --quick: issue 10 asks 100,000 vs 1,000" if ctx.quick else ""),
    )
