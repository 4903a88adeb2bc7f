"""Workload 3: commit and read back one large artifact of mixed data.

Runs in a child process (``python -m benchmarks.workloads.large_artifact
STORE FILE``) so that its peak RSS is its own: baseline is the RSS after
importing agentfs and opening the stores (the peak is reset there through
/proc/self/clear_refs); the figure is the peak (VmHWM) over it.

The artifact is committed COMMITS times, each into a new store, and the
fastest commit is the figure, as the best of as many passes is for the
zstd -T2 peer (limits.zstd_threaded_throughput): 2 cores shared with other
work can lose one to it for a pass, on either side.

Then LOCKSTEP rounds, in this process, of one pass of that same peer (level 3,
2 threads, the file streamed in 4 MiB reads, the output dropped) and one commit
into a new store, the one that goes first alternating: both see the same load,
which the peer measured once, earlier, in the parent does not (on this shared
machine the same code measured 0.83x-1.08x of it from one minute to the next).
"""

from __future__ import annotations

import json
import os
import resource
import statistics
import sys
import time
from pathlib import Path
from typing import Any

from ..context import Context
from ..limits import zstd_threaded_throughput
from ..peers import tree_size
from .common import agentfs_part, child_json, fig, mb, read_through

W = "3 large artifact"


def _maxrss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def _status_mb(field: str) -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024
    raise KeyError(field)


def _baseline_mb() -> float:
    """Current RSS, after resetting the peak (VmHWM) to it where Linux allows."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return _status_mb("VmRSS")
    except OSError:
        return _maxrss_mb()


def _peak_mb() -> float:
    try:
        return _status_mb("VmHWM")
    except (OSError, KeyError):
        return _maxrss_mb()


def _cpu_s() -> float:
    """CPU seconds this process has used, all its threads, user and system."""
    times = os.times()
    return times.user + times.system


COMMITS = 3
LOCKSTEP = 4


def _commit(store: Any, file: str) -> tuple[float, float]:
    """(seconds, CPU seconds) of committing `file` to a new run of `store`."""
    cpu = _cpu_s()
    t = time.perf_counter()
    store.run("bench/large").commit({"step": 0}, artifacts={"big.bin": Path(file)})
    return time.perf_counter() - t, _cpu_s() - cpu


def child(store_dir: str, file: str) -> dict[str, Any]:
    import agentfs

    size = Path(file).stat().st_size
    with agentfs.open(Path(store_dir) / "store-0") as store:
        base = _baseline_mb()
        commits = [_commit(store, file)]
        cp = store.run("bench/large").latest()
        assert cp is not None
        t = time.perf_counter()
        got = read_through(cp.artifacts["big.bin"])
        read_s = time.perf_counter() - t
        assert got == size, f"read back {got} bytes of {size}"
    peak = _peak_mb()  # of the first commit and its read: the others only time more commits
    for n in range(1, COMMITS):
        with agentfs.open(Path(store_dir) / f"store-{n}") as store:
            commits.append(_commit(store, file))
    commit_s, commit_cpu_s = min(commits)
    lockstep = [_lockstep_round(Path(store_dir) / f"store-lockstep-{n}", file, zstd_first=n % 2 == 0) for n in range(LOCKSTEP)]
    return {
        "lockstep": lockstep,
        "size": size,
        "commit_s": commit_s,
        "commit_cpu_s": commit_cpu_s,
        "commits_s": [seconds for seconds, _cpu in commits],
        "read_s": read_s,
        "base_rss_mb": base,
        "peak_rss_mb": peak,
    }


def _lockstep_round(store_dir: Path, file: str, zstd_first: bool) -> dict[str, float]:
    """MB/s of one zstd -3 -T2 pass over `file` and of one commit of it into a new store, one after the other."""
    import agentfs

    size = Path(file).stat().st_size
    with agentfs.open(store_dir) as store:
        sides: dict[str, Any] = {
            "zstd_mbps": lambda: zstd_threaded_throughput(Path(file), threads=2, passes=1),
            "commit_mbps": lambda: mb(size) / _commit(store, file)[0],
        }
        order = list(sides) if zstd_first else list(sides)[::-1]
        return {name: sides[name]() for name in order}


def agentfs_side(ctx: Context) -> dict[str, Any]:
    store = ctx.new_dir("w3-agentfs")
    res = child_json(["-m", "benchmarks.workloads.large_artifact", str(store), str(ctx.big_file())], timeout=1200)
    res["store_bytes"] = tree_size(store / "store-0")
    return res


def run(ctx: Context) -> None:
    big = ctx.big_file()
    size = big.stat().st_size
    z = ctx.limits.zstd()
    res = agentfs_part(ctx, W, "large artifact", lambda: agentfs_side(ctx))
    label = f"{ctx.sizes.big_mb} MiB"
    commit = mb(size) / res["commit_s"] if res else None
    read = mb(size) / res["read_s"] if res else None
    fig(
        ctx,
        W,
        f"commit throughput, {label} (MB/s)",
        commit,
        "zstd -3 compress alone",
        z["compress_mbps"],
        ">= 0.7x",
        lambda v: v >= 0.7 * z["compress_mbps"],
    )
    z2 = ctx.limits.zstd_2_threads()
    fig(
        ctx,
        W,
        f"commit throughput, {label} (MB/s)",
        commit,
        "zstd -3 compress, 2 threads",
        z2,
        ">= 0.8x",
        lambda v: v >= 0.8 * z2,
        f"issue 10; the zstandard package's compressor with threads=2 on the same file; each the best of {COMMITS}"
        + (f" (commits: {', '.join(f'{mb(size) / s:.0f}' for s in res['commits_s'])} MB/s)" if res else ""),
    )
    if res:
        rounds = res["lockstep"]
        ratios = sorted(r["commit_mbps"] / r["zstd_mbps"] for r in rounds)
        fig(
            ctx,
            W,
            f"commit throughput, {label}, in lockstep (MB/s, median of {len(rounds)})",
            statistics.median(r["commit_mbps"] for r in rounds),
            "zstd -3 compress, 2 threads, in lockstep",
            statistics.median(r["zstd_mbps"] for r in rounds),
            ">= 0.95x (median ratio)",
            lambda _v: statistics.median(ratios) >= 0.95,
            "issue 21; a zstd pass and a commit in turns in one process, the one first alternating; ratio each round: "
            + ", ".join(f"{ratio:.2f}" for ratio in ratios)
            + f" (median {statistics.median(ratios):.3f}); zstd's output is dropped, the commit hashes, writes and syncs",
        )
    fig(
        ctx,
        W,
        f"commit CPU time, all threads, {label} (s)",
        res["commit_cpu_s"] if res else None,
        "zstd -3 compress alone",
        mb(size) / z["compress_mbps"],
        note="of the fastest commit; what both cores share (chunking, sha256, zstd, appends): throughput follows it on a busy machine",
    )
    fig(ctx, W, f"read throughput, {label}, open() stream (MB/s)", read, "zstd decompress alone", z["decompress_mbps"])
    rss = res["peak_rss_mb"] - res["base_rss_mb"] if res else None
    fig(ctx, W, "peak RSS over baseline, commit + read (MB)", rss, "goal", 200.0, "< 200 MB", lambda v: v < 200)
    fig(ctx, W, "store size / artifact size", res["store_bytes"] / size if res else None, "zstd -3 size / input", 1 / z["ratio"])


if __name__ == "__main__":
    print(json.dumps(child(sys.argv[1], sys.argv[2])))
