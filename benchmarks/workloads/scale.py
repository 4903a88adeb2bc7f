"""Workload 8: a store with many objects. Commit latency (10 KB state,
default durability) on an empty store and on one holding ``scale_objects``
objects; ``verify()`` and ``gc()`` time on the full one.

The objects are made through the public API: commits of 200 unique 2 KB
artifacts each, with ``durability="process"``, until ``objects/`` holds
enough files."""

from __future__ import annotations

import os
import time
from typing import Any

from .. import data
from ..context import Context
from ..peers import tree_files
from .common import agentfs_part, fig, median, timed

W = "8 scale"
PER_COMMIT = 200


def commit_latencies(ctx: Context, path: Any, n: int) -> list[float]:
    af = ctx.agentfs
    assert af is not None
    run = af.open(path).run("bench/scale-commits")
    states = data.states(n + 1, 10_000, seed=8)
    run.commit(states[0])
    return timed(run.commit, states[1:])


def fill(ctx: Context, path: Any, target: int) -> int:
    af = ctx.agentfs
    assert af is not None
    run = af.open(path, durability="process").run("bench/scale-fill")
    count, i = 0, 0
    while count < target:
        for _ in range(max(1, (target - count) // PER_COMMIT)):
            arts = {f"a{j:03d}.bin": os.urandom(1024).hex().encode() for j in range(PER_COMMIT)}
            run.commit({"i": i}, artifacts=arts)
            i += 1
        count = tree_files(path / "objects")
    return count


def agentfs_side(ctx: Context) -> dict[str, Any]:
    n = ctx.sizes.scale_commits
    empty = median(commit_latencies(ctx, ctx.new_dir("w8-empty"), n))
    path = ctx.new_dir("w8-full")
    t = time.perf_counter()
    objects = fill(ctx, path, ctx.sizes.scale_objects)
    fill_s = time.perf_counter() - t
    full = median(commit_latencies(ctx, path, n))
    af = ctx.agentfs
    assert af is not None
    store = af.open(path)
    t = time.perf_counter()
    problems = store.verify()
    verify_s = time.perf_counter() - t
    t = time.perf_counter()
    store.gc()
    gc_s = time.perf_counter() - t
    return {"empty": empty, "full": full, "objects": objects, "fill_s": fill_s,
            "verify_s": verify_s, "gc_s": gc_s, "problems": problems}


def run(ctx: Context) -> None:
    res = agentfs_part(ctx, W, "scale", lambda: agentfs_side(ctx))
    target = ctx.sizes.scale_objects
    if res:
        ctx.report.note(f"{W}: {res['objects']:,} object files made in {res['fill_s']:.1f} s; "
                        f"verify() returned {res['problems']!r:.200}")
    fig(ctx, W, f"commit median with {target:,} objects (ms)", res["full"] if res else None,
        "same on an empty store", res["empty"] if res else None, "<= 1.2x",
        (lambda v: v <= 1.2 * res["empty"]) if res else None)
    fig(ctx, W, f"verify() with {target:,} objects (s)", res["verify_s"] if res else None)
    fig(ctx, W, f"gc() with {target:,} objects (s)", res["gc_s"] if res else None,
        note="nothing to delete: all objects referenced")
