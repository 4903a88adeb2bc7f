"""Workload 8: a store with many objects. Commit latency (10 KB state,
default durability) on an empty store and on one holding ``scale_objects``
objects, the two in lockstep after the fill and an ``os.sync()`` (timed one
after the other, the full store's commits ran while the kernel wrote back the
fill's gigabytes: 0.59x in one full run, 2.25x in the next, same code);
``verify()`` and ``gc()`` time on the full one.

The objects are made through the public API: commits of a unique 1 MiB
random value each, with ``durability="process"``, until ``objects/`` holds
enough files (agentfs chunks a value that size into ~4 KB objects; small
objects packed inside log entries are not counted)."""

from __future__ import annotations

import math
import os
import time
from pathlib import Path
from typing import Any

from .. import data
from ..context import Context
from .common import agentfs_part, fig, lockstep, median

W = "8 scale"
VALUE_BYTES = 1 << 20
MAX_FILL_BYTES = 2 << 30


def commit_latencies(ctx: Context, empty: Path, full: Path, n: int) -> dict[str, list[float]]:
    """Commit latencies (ms) on each store, one commit to each per step, who goes first alternating."""
    af = ctx.agentfs
    assert af is not None
    runs = {name: af.open(path).run("bench/scale-commits") for name, path in (("empty", empty), ("full", full))}
    states = data.states(n + 1, 10_000, seed=8)
    for run in runs.values():
        run.commit(states[0])
    return lockstep({name: run.commit for name, run in runs.items()}, states[1:])


def fill(ctx: Context, path: Path, target: int) -> int:
    """Commit unique random values until the store holds ``target`` objects
    (``stats().objects``; or ``MAX_FILL_BYTES`` were committed); returns the count reached."""
    af = ctx.agentfs
    assert af is not None
    store = af.open(path, durability="process")
    run = store.run("bench/scale-fill")
    count = committed = 0
    batch = 1
    while count < target and committed < MAX_FILL_BYTES:
        for _ in range(batch):
            run.commit({"i": committed, "blob": os.urandom(VALUE_BYTES)})
            committed += VALUE_BYTES
        new = store.stats().objects
        if new <= count:
            raise RuntimeError(f"the store's objects stopped growing at {new}")
        per_commit = new / (committed / VALUE_BYTES)
        count = new
        batch = max(1, math.ceil((target - count) / per_commit))
    return count


def _timed_call(ctx: Context, what: str, fn: Any) -> tuple[float | None, Any]:
    """(seconds, result) of ``fn()``; (None, None) and a note if it raised."""
    t = time.perf_counter()
    try:
        result = fn()
    except Exception as exc:  # the other figures still count
        ctx.report.note(f"{W}: agentfs {what} failed: {type(exc).__name__}: {exc}")
        return None, None
    return time.perf_counter() - t, result


def agentfs_side(ctx: Context) -> dict[str, Any]:
    af = ctx.agentfs
    assert af is not None
    path = ctx.new_dir("w8-full")
    t = time.perf_counter()
    objects = fill(ctx, path, ctx.sizes.scale_objects)
    fill_s = time.perf_counter() - t
    os.sync()  # the fill's writeback is not what a commit on a large store costs
    times = commit_latencies(ctx, ctx.new_dir("w8-empty"), path, ctx.sizes.scale_commits)
    empty, full = median(times["empty"]), median(times["full"])
    store = af.open(path)
    verify_s, problems = _timed_call(ctx, "verify()", store.verify)
    gc_s, _ = _timed_call(ctx, "gc()", store.gc)
    return {"empty": empty, "full": full, "objects": objects, "fill_s": fill_s, "verify_s": verify_s, "gc_s": gc_s, "problems": problems}


def run(ctx: Context) -> None:
    res = agentfs_part(ctx, W, "scale", lambda: agentfs_side(ctx))
    target = res["objects"] if res else ctx.sizes.scale_objects
    if res:
        ctx.report.note(f"{W}: {res['objects']:,} objects made in {res['fill_s']:.1f} s; verify() returned {res['problems']!r:.200}")
    fig(
        ctx,
        W,
        f"commit median with {target:,} objects (ms)",
        res["full"] if res else None,
        "same on an empty store",
        res["empty"] if res else None,
        "<= 1.2x",
        (lambda v: v <= 1.2 * res["empty"]) if res else None,
    )
    fig(ctx, W, f"verify() with {target:,} objects (s)", res["verify_s"] if res else None)
    fig(ctx, W, f"gc() with {target:,} objects (s)", res["gc_s"] if res else None, note="nothing to delete: all objects referenced")
