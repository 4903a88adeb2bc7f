"""Workload 6: push throughput to moto S3.

(a) ``push_small`` checkpoints of about 4 KB of state, committed first, then
pushed by one sync daemon until ``flush`` returns; compared with s3fs
uploading the same checkpoints one object each, sequentially (and, for
context, with s3fs's own batching). (b) One commit with the large artifact,
pushed the same way; compared with s3fs ``put_file`` of the file.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from ..context import Context
from .common import agentfs_part, fig, flush, mb, require_sync

W = "6 push throughput"


def push(ctx: Context, store_dir: Path, name: str) -> tuple[float, int, int]:
    """Seconds to push the whole store at ``store_dir``; keys on the remote after;
    requests the server received meanwhile."""
    require_sync(ctx)
    af = ctx.agentfs
    assert af is not None
    moto = ctx.moto()
    url = moto.bucket("bench-w6") + f"/{name}"
    store = af.open(store_dir)
    before = moto.stats()
    t = time.perf_counter()
    with store.sync(url, storage_options=moto.storage_options) as daemon:
        if not flush(ctx, W, daemon, ctx.sizes.flush_timeout):
            raise TimeoutError("push did not finish")
    elapsed = time.perf_counter() - t
    requests = sum((moto.stats() - before).requests.values())
    keys = len(moto.fs().find(url))
    return elapsed, keys, requests


def small_side(ctx: Context) -> dict[str, Any]:
    af = ctx.agentfs
    assert af is not None
    path = ctx.new_dir("w6-small")
    run = af.open(path).run("bench/push-small")
    for s in ctx.small_states():
        run.commit(s)
    elapsed, keys, requests = push(ctx, path, "small")
    return {"rate": len(ctx.small_states()) / elapsed, "keys": keys, "requests": requests}


def large_side(ctx: Context) -> dict[str, Any]:
    af = ctx.agentfs
    assert af is not None
    path = ctx.new_dir("w6-large")
    af.open(path).run("bench/push-large").commit({"v": 1}, artifacts={"big.bin": ctx.big_file()})
    elapsed, keys, _requests = push(ctx, path, "large")
    return {"mbps": mb(ctx.big_file().stat().st_size) / elapsed, "keys": keys}


def run(ctx: Context) -> None:
    n = ctx.sizes.push_small
    s3 = ctx.limits.s3_small()
    res = agentfs_part(ctx, W, "push of small checkpoints", lambda: small_side(ctx))
    rate = res["rate"] if res else None
    fig(
        ctx,
        W,
        f"push {n} x 4 KB checkpoints (checkpoints/s)",
        rate,
        "s3fs, 1 object per checkpoint, sequential",
        s3["sequential_per_s"],
        ">= 3x",
        lambda v: v >= 3 * s3["sequential_per_s"],
    )
    fig(ctx, W, f"push {n} x 4 KB checkpoints (checkpoints/s)", rate, "s3fs put of all files, batched", s3["batched_per_s"])
    fig(ctx, W, "remote keys per checkpoint", res["keys"] / n if res else None, "1 object per checkpoint", 1.0)
    fig(ctx, W, "S3 requests per checkpoint (all kinds)", res["requests"] / n if res else None, "1 object per checkpoint", 1.0)
    large = ctx.limits.s3_large()
    res2 = agentfs_part(ctx, W, "push of a large artifact", lambda: large_side(ctx))
    fig(
        ctx,
        W,
        f"push one {ctx.sizes.big_mb} MiB artifact (MB/s)",
        res2["mbps"] if res2 else None,
        "s3fs put_file of the file",
        large,
        ">= 1.0x",
        lambda v: v >= large,
    )
