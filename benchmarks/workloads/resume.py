"""Workload 7: resume from the remote into an empty store, with a short and a
long history. A store with H checkpoints (4 KB states, committed with
``durability="process"`` to save setup time) is pushed to moto; then a fresh
directory opens it with ``remote=`` and reads ``latest().state``: the time of
that, and the number of object files that landed in the new store."""

from __future__ import annotations

import time
from typing import Any

from .. import data
from ..context import Context
from ..peers import tree_files
from .common import agentfs_part, fig, flush

W = "7 resume"
RUN = "bench/resume"


def history(ctx: Context, h: int) -> dict[str, Any]:
    af = ctx.agentfs
    assert af is not None
    moto = ctx.moto()
    url = moto.bucket("w7") + f"/h{h}"
    src = ctx.new_dir(f"w7-src-{h}")
    store = af.open(src, durability="process")
    run = store.run(RUN)
    last: dict[str, Any] = {}
    for i in range(h):
        last = data.small_state(i, 4_000, seed=7)
        run.commit(last)
    t = time.perf_counter()
    with store.sync(url, storage_options=moto.storage_options) as daemon:
        if not flush(ctx, W, daemon, ctx.sizes.flush_timeout):
            raise TimeoutError(f"push of {h} checkpoints did not finish")
    push_s = time.perf_counter() - t
    dst = ctx.new_dir(f"w7-dst-{h}")
    t = time.perf_counter()
    other = af.open(dst, remote=url, storage_options=moto.storage_options)
    cp = other.run(RUN).latest()
    assert cp is not None, "latest() found nothing on the remote"
    state = cp.state
    resume_s = time.perf_counter() - t
    assert state == last, "resumed state is not the last commit"
    objects = dst / "objects"
    return {"resume_s": resume_s, "push_s": push_s,
            "objects": tree_files(objects) if objects.exists() else 0}


def run(ctx: Context) -> None:
    lo, hi = ctx.sizes.resume_small, ctx.sizes.resume_large
    short = agentfs_part(ctx, W, f"resume with {lo}", lambda: history(ctx, lo))
    long = agentfs_part(ctx, W, f"resume with {hi}", lambda: history(ctx, hi))
    fig(ctx, W, f"resume time, {hi:,} checkpoints of history (s)",
        long["resume_s"] if long else None, f"same with {lo}",
        short["resume_s"] if short else None, "<= 1.5x",
        (lambda v: v <= 1.5 * short["resume_s"]) if short else None)
    fig(ctx, W, f"objects fetched, {hi:,} checkpoints of history",
        float(long["objects"]) if long else None, f"same with {lo}",
        float(short["objects"]) if short else None)
    fig(ctx, W, f"push of {hi:,} checkpoints (s)", long["push_s"] if long else None,
        f"push of {lo}", short["push_s"] if short else None)
