"""Workload 14: an encrypted store next to a plaintext one, in the same run, on the same data.

Each figure is encrypted / plaintext, the two sides in lockstep where a latency is compared (a
commit to each per step, the one that goes first alternating: ``common.lockstep``), so that both
see the same load on this shared machine:

- small durable commit (10 KB states, new content each step): median, goal <= 1.10x;
- the growing conversation (``conv_steps`` steps, durability power): total commit time, goal <= 1.10x;
- the large artifact (``big_mb`` MiB of mixed data): commit throughput, the best of two commits into
  fresh stores on each side, taking turns, goal >= 0.85x;
- store size (the segments' bytes) after each of the three, goal within 2%, each noting what the
  extra bytes are (28 bytes of nonce and tag a sealed frame: one per group of a commit's small records,
  one per larger record; the frames' keys, which hold stored run names outside groups and nothing in one);
- resume from moto's S3 (10 checkpoints pushed, `latest().state` from an empty directory): the
  requests the server received, goal equal.

The encrypted side's passphrase slot uses scrypt's default cost; opening is not timed.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, NamedTuple

from agentfs.engine.segments import scan_from, segment_ids
from agentfs.format.crypto import SEALED_OVERHEAD
from agentfs.format.kinds import GROUP
from agentfs.format.segment import HEADER, segment_name

from .. import data
from ..context import Context
from .common import agentfs_part, fig, flush, lockstep, median, require_sync

W = "14 encryption"
PASSPHRASE = "benchmark passphrase"
SIDES = ("encrypted", "plaintext")


def _open(ctx: Context, side: str, name: str, **options: Any) -> Any:
    af = ctx.agentfs
    assert af is not None
    encryption = af.Encryption(passphrase=PASSPHRASE) if side == "encrypted" else None
    return af.open(ctx.new_dir(f"w14-{name}-{side}"), encryption=encryption, **options)


def _size(store: Any) -> int:
    return sum(path.stat().st_size for path in Path(store.root, "segments").iterdir())


class _Records(NamedTuple):
    """The record frames of a store's segments, as the bytes lie (a group is one frame, its records inside it)."""

    count: int
    groups: int
    key_bytes: int  # of the frames' keys: stored run names in a lone record's, nothing in a group's


def _records(store: Any) -> _Records:
    segments = Path(store.root, "segments")
    # each segment's batches as written (a scan stops at a sealed segment's footer, whose rows name a group's records)
    frames = [entry for sid in segment_ids(segments) for entry in scan_from(segments / segment_name(sid), HEADER.size).entries]
    return _Records(len(frames), sum(entry.kind == GROUP for entry in frames), sum(len(entry.key) for entry in frames))


def _gap_note(records: dict[str, _Records], sizes: dict[str, int]) -> str:
    """What the encrypted store's extra bytes are: each sealed frame's nonce and tag, and the frames' keys."""
    encrypted = records["encrypted"]
    sealing = encrypted.count * SEALED_OVERHEAD
    keys = encrypted.key_bytes - records["plaintext"].key_bytes
    gap = sizes["encrypted"] - sizes["plaintext"]
    return (
        f"of the {gap / 1e3:,.1f} KB more: {encrypted.count:,} sealed frames ({encrypted.groups:,} of them groups of small "
        f"records) x {SEALED_OVERHEAD} B = {sealing / 1e3:,.1f} KB; frame keys {keys / 1e3:+,.1f} KB (a group's is empty, "
        "its records' plain keys inside it)"
    )


def _ratio_figures(ctx: Context, what: str, values: dict[str, float], goal: str, met: Any, unit: str) -> None:
    fig(ctx, W, f"{what} ({unit}), encrypted", values["encrypted"], f"{what}, plaintext", values["plaintext"], goal, met)


def small_commits(ctx: Context) -> dict[str, Any]:
    states = data.states(ctx.sizes.small_commits + 1, 10_000)
    stores = {side: _open(ctx, side, "small") for side in SIDES}
    runs = {side: stores[side].run("bench/small") for side in SIDES}
    for run in runs.values():
        run.commit(states[0])
    times = lockstep({side: runs[side].commit for side in SIDES}, states[1:])
    for store in stores.values():
        store.close()  # first: a clean close gives back the segment's preallocated tail
    sizes = {side: _size(stores[side]) for side in SIDES}
    records = {side: _records(stores[side]) for side in SIDES}
    return {"median": {side: median(times[side]) for side in SIDES}, "size": sizes, "records": records}


def conversation(ctx: Context) -> dict[str, Any]:
    stores = {side: _open(ctx, side, "conversation") for side in SIDES}
    runs = {side: stores[side].run("bench/conversation") for side in SIDES}
    times = lockstep({side: runs[side].commit for side in SIDES}, data.conversation(ctx.sizes.conv_steps))
    for store in stores.values():
        store.close()  # first: a clean close gives back the segment's preallocated tail
    sizes = {side: _size(stores[side]) for side in SIDES}
    records = {side: _records(stores[side]) for side in SIDES}
    return {"total": {side: sum(times[side]) / 1000 for side in SIDES}, "size": sizes, "records": records}


def large_artifact(ctx: Context) -> dict[str, Any]:
    path = ctx.big_file()
    nbytes = path.stat().st_size
    best: dict[str, float] = {}
    sizes: dict[str, int] = {}
    records: dict[str, _Records] = {}
    for turn in range(2):
        for side in SIDES if turn % 2 == 0 else SIDES[::-1]:
            store = _open(ctx, side, f"large{turn}")
            t = time.perf_counter()
            store.run("bench/large").commit({}, artifacts={"big.bin": path})
            elapsed = time.perf_counter() - t
            best[side] = min(best.get(side, elapsed), elapsed)
            store.close()
            sizes[side] = _size(store)
            records[side] = _records(store)
    return {"throughput": {side: nbytes / best[side] / 1_000_000 for side in SIDES}, "size": sizes, "records": records}


def resume_requests(ctx: Context) -> dict[tuple[str, str], int]:
    require_sync(ctx)
    af = ctx.agentfs
    assert af is not None
    moto = ctx.moto()
    found = {}
    for side in SIDES:
        url = moto.bucket(f"bench-w14-{side}")
        store = _open(ctx, side, "resume-src", durability="process")
        for step in range(ctx.sizes.resume_small):
            store.run("bench/resume").commit(data.small_state(step, 4_000))
        with store.sync(url, storage_options=moto.storage_options) as daemon:
            if not flush(ctx, W, daemon, ctx.sizes.flush_timeout):
                raise TimeoutError("push did not finish")
        store.close()
        encryption = af.Encryption(passphrase=PASSPHRASE) if side == "encrypted" else None
        options = {"remote": url, "storage_options": moto.storage_options, "encryption": encryption}
        dst = ctx.new_dir(f"w14-resume-dst-{side}")
        for when in ("new directory", "store made before"):
            if when == "store made before":  # the machine opened this remote before (and so holds its key slots)
                dst = ctx.new_dir(f"w14-resume-again-{side}")
                af.open(dst, **options).close()
            before = moto.stats()
            with af.open(dst, **options) as other:
                head = other.run("bench/resume").latest()
                assert head is not None and head.state["step"] == ctx.sizes.resume_small - 1
            found[when, side] = (moto.stats() - before).count("GET", "LIST", "HEAD", "PUT", "POST", "DELETE")
    return found


def run(ctx: Context) -> None:
    small = agentfs_part(ctx, W, "small commits", lambda: small_commits(ctx))
    conv = agentfs_part(ctx, W, "conversation", lambda: conversation(ctx))
    large = agentfs_part(ctx, W, "large artifact", lambda: large_artifact(ctx))
    resumed = agentfs_part(ctx, W, "resume", lambda: resume_requests(ctx))
    n, steps, big = ctx.sizes.small_commits, ctx.sizes.conv_steps, ctx.sizes.big_mb
    if small is not None:
        fig(
            ctx,
            W,
            f"small commit median (ms), fsync, n={n}, encrypted",
            small["median"]["encrypted"],
            "plaintext, in lockstep",
            small["median"]["plaintext"],
            "<= 1.10x",
            lambda v: v <= 1.10 * small["median"]["plaintext"],
        )
    if conv is not None:
        fig(
            ctx,
            W,
            f"{steps}-step conversation, total commit time (s), encrypted",
            conv["total"]["encrypted"],
            "plaintext, in lockstep",
            conv["total"]["plaintext"],
            "<= 1.10x",
            lambda v: v <= 1.10 * conv["total"]["plaintext"],
        )
    if large is not None:
        fig(
            ctx,
            W,
            f"{big} MiB artifact commit throughput (MB/s), encrypted",
            large["throughput"]["encrypted"],
            "plaintext, best of 2 each",
            large["throughput"]["plaintext"],
            ">= 0.85x",
            lambda v: v >= 0.85 * large["throughput"]["plaintext"],
        )
    for label, part in (("small commits", small), ("conversation", conv), ("large artifact", large)):
        if part is not None:
            sizes = part["size"]
            fig(
                ctx,
                W,
                f"store size after {label} (MB), encrypted",
                sizes["encrypted"] / 1e6,
                "plaintext",
                sizes["plaintext"] / 1e6,
                "within 2%",
                lambda v, p=sizes["plaintext"] / 1e6: abs(v - p) <= 0.02 * p,
                note=_gap_note(part["records"], sizes),
            )
    if resumed is not None:
        new, made = resumed["new directory", "plaintext"], resumed["store made before", "plaintext"]
        fig(
            ctx,
            W,
            "resume requests to S3 (a store made before), encrypted",
            resumed["store made before", "encrypted"],
            "plaintext",
            made,
            "equal",
            lambda v: v == made,
        )
        fig(
            ctx,
            W,
            "resume requests to S3 (a new directory), encrypted",
            resumed["new directory", "encrypted"],
            "plaintext",
            new,
            note="a new directory also lists and reads the remote's key slots (keys/) to unlock it",
        )
