"""Workload 7: resume from the remote into an empty store, with a short and a
long history. A store with H checkpoints (4 KB states, committed with
``durability="process"`` to save setup time) is pushed to moto; then a fresh
directory opens it with ``remote=`` and reads ``latest().state``: the time of
that (the median of 9, the two histories taking turns), the requests (GETs,
LISTs, all kinds) the S3 server received during the first, and the files that
landed in the new store."""

from __future__ import annotations

import random
import time
from pathlib import Path
from typing import Any

from agentfs.format import keys

from ..context import Context
from ..peers import tree_files
from .common import agentfs_part, at_most, fig, flush, median, require_sync

W = "7 resume"
RUN = "bench/resume"
RESUMES = 9  # timed resumes per history, each into an empty store, the histories taking turns; the median is reported


def resume(ctx: Context, url: str) -> tuple[float, Path, Any]:
    """Seconds to open an empty store on ``url`` and read ``latest().state``."""
    af = ctx.agentfs
    assert af is not None
    dst = ctx.new_dir("w7-dst")
    t = time.perf_counter()
    other = af.open(dst, remote=url, storage_options=ctx.moto().storage_options)
    cp = other.run(RUN).latest()
    assert cp is not None, "latest() found nothing on the remote"
    state = cp.state
    elapsed = time.perf_counter() - t
    other.close()
    return elapsed, dst, state


def one_key_list_ms(ctx: Context, url: str) -> float:
    """The server's own cost of the request a head lookup is: a one-key listing of the run's head keys."""
    fs = ctx.moto().fs()
    bucket, _, path = url.removeprefix("s3://").partition("/")
    prefix = "/".join([path, *keys.head_dir_key(RUN)]) + "/"
    times = []
    for _ in range(10):
        t = time.perf_counter()
        fs.call_s3("list_objects_v2", Bucket=bucket, Prefix=prefix, StartAfter=prefix, MaxKeys=1)
        times.append((time.perf_counter() - t) * 1000)
    return sorted(times)[len(times) // 2]


def history(ctx: Context, h: int, warmup: bool = False) -> dict[str, Any]:
    require_sync(ctx)
    af = ctx.agentfs
    assert af is not None
    moto = ctx.moto()
    url = moto.bucket("bench-w7") + f"/h{h}"
    src = ctx.new_dir(f"w7-src-{h}")
    store = af.open(src, durability="process")
    run = store.run(RUN)
    last: dict[str, Any] = {}
    rng = random.Random(7)
    for i in range(h):  # ~4 KB, new each step; cheap to make (10,000 of them in the full run)
        last = {"step": i, "notes": rng.randbytes(2_000).hex()}
        run.commit(last)
    t = time.perf_counter()
    with store.sync(url, storage_options=moto.storage_options) as daemon:
        if not flush(ctx, W, daemon, ctx.sizes.resume_flush_timeout):
            raise TimeoutError(f"push of {h} checkpoints did not finish")
    push_s = time.perf_counter() - t
    if warmup:  # one untimed resume first: the process's one-time costs (imports, clients) are not the history's
        resume(ctx, url)
    before = moto.stats()
    resume_s, dst, state = resume(ctx, url)
    reads = moto.stats() - before
    assert state == last, "resumed state is not the last commit"
    return {
        "url": url,
        "list_ms": one_key_list_ms(ctx, url),
        "resume_s": resume_s,
        "push_s": push_s,
        "gets": reads.count("GET"),
        "lists": reads.count("LIST"),
        "requests": sum(reads.requests.values()),
        "files": tree_files(dst),
    }


def time_in_turns(ctx: Context, parts: list[dict[str, Any]]) -> None:
    """Each part's resume_s becomes the median of RESUMES resumes, the parts' taking turns.

    A resume is ~50 ms, near this machine's jitter (2 cores, shared): timed one history after the
    other, a busy spell fell on one side and the ratio ranged 0.4x-1.6x; in turns, both meet it.
    """
    times: list[list[float]] = [[part["resume_s"]] for part in parts]
    for _ in range(RESUMES - 1):
        for part, kept in zip(parts, times, strict=True):
            kept.append(resume(ctx, part["url"])[0])
    for part, kept in zip(parts, times, strict=True):
        part["resume_s"] = median(kept)


def run(ctx: Context) -> None:
    lo, hi = ctx.sizes.resume_small, ctx.sizes.resume_large
    short = agentfs_part(ctx, W, f"resume with {lo}", lambda: history(ctx, lo, warmup=True))
    long = agentfs_part(ctx, W, f"resume with {hi}", lambda: history(ctx, hi))
    agentfs_part(ctx, W, "timed resumes", lambda: time_in_turns(ctx, [part for part in (short, long) if part]))
    at_most(
        ctx,
        W,
        f"resume time, {hi:,} checkpoints of history (s)",
        long["resume_s"] if long else None,
        f"same with {lo}",
        short["resume_s"] if short else None,
        1.5,
    )
    counted = {
        "gets": "S3 GETs during resume",
        "lists": "S3 LIST requests during resume",
        "requests": "S3 requests (all kinds) during resume",
        "files": "files in the resumed store",
    }
    for key, label in counted.items():
        long_value, short_value = (float(part[key]) if part else None for part in (long, short))
        fig(ctx, W, f"{label}, {hi:,} of history", long_value, f"same with {lo}", short_value)
    fig(
        ctx,
        W,
        f"moto: one one-key list request, {hi:,} of history (ms)",
        long["list_ms"] if long else None,
        f"same with {lo}",
        short["list_ms"] if short else None,
        note="the server's cost, not agentfs's: moto scans the bucket per list, S3 does not",
    )
    fig(ctx, W, f"push of {hi:,} checkpoints (s)", long["push_s"] if long else None, f"push of {lo}", short["push_s"] if short else None)
