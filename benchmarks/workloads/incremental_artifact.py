"""Workload 4: one byte changed in the middle of the large artifact.

Bytes the second commit adds to the store, and bytes it uploads: the request
bodies the moto server received while the sync daemon pushed it.
The data file is restored afterwards.
"""

from __future__ import annotations

import contextlib
from typing import Any

from ..context import Context
from ..data import flip_byte
from .common import agentfs_part, fig, flush, mb, require_sync

W = "4 incremental artifact"


def agentfs_side(ctx: Context) -> dict[str, Any]:
    af = ctx.agentfs
    assert af is not None
    big = ctx.big_file()
    path = ctx.new_dir("w4-agentfs")
    store = af.open(path)
    run = store.run("bench/incremental")
    out: dict[str, Any] = {}
    timeout = ctx.sizes.flush_timeout
    with contextlib.ExitStack() as stack:
        try:
            require_sync(ctx)
            moto = ctx.moto()
            url = moto.bucket("bench-w4") + "/store"
            daemon = stack.enter_context(store.sync(url, storage_options=moto.storage_options))
        except Exception as exc:  # the local figure still counts
            ctx.report.note(f"{W}: store.sync failed: {type(exc).__name__}: {exc}")
            daemon = None
        run.commit({"v": 1}, artifacts={"big.bin": big})
        synced = daemon is not None and flush(ctx, W, daemon, timeout)
        rx0 = moto.stats() if synced else None
        before = store.stats().stored_bytes
        pos = flip_byte(big)
        try:
            run.commit({"v": 2}, artifacts={"big.bin": big})
        finally:
            flip_byte(big, pos)
        out["added"] = store.stats().stored_bytes - before  # records stored, not the segment's preallocated tail
        if rx0 is not None and flush(ctx, W, daemon, timeout):
            delta = moto.stats() - rx0
            out["uploaded"] = delta.body_bytes
            out["requests"] = delta.requests
    return out


def run(ctx: Context) -> None:
    size = ctx.big_file().stat().st_size
    res = agentfs_part(ctx, W, "incremental artifact", lambda: agentfs_side(ctx)) or {}
    whole = mb(size)
    fig(
        ctx,
        W,
        "bytes added to the store by the 2nd commit (MB)",
        mb(res["added"]) if "added" in res else None,
        "whole file",
        whole,
        "< 1 MB",
        lambda v: v < 1,
        "record bytes (store.stats().stored_bytes): the open segment's preallocated step is not data",
    )
    fig(
        ctx,
        W,
        "bytes uploaded for the 2nd commit (MB)",
        mb(res["uploaded"]) if "uploaded" in res else None,
        "s3fs put of whole file",
        whole,
        "< 1 MB",
        lambda v: v < 1,
        note="request bodies moto received; requests: " + str(res.get("requests", "?")),
    )
