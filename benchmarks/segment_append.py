"""A small durable segment append next to the machine's durable small-file-write floor.

    python -m benchmarks.segment_append [--n 300] [--size 10000] [--pace-ms 0]

Alternates, n times: one durable 10 KB new-file write (benchmarks/limits.durable_write: write,
fsync, rename, directory fsync) and one SegmentWriter batch of one 10 KB record (one pwrite, one
fdatasync), each followed by the same pause (--pace-ms), so both see the same machine state (an idle
vCPU wakes slowly from I/O waits). Prints both medians and p99s (ms) and the ratio segment / floor.
Not part of `python -m benchmarks`: the segment engine is not yet what the store uses.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from agentfs.engine.segment_writer import SegmentWriter
from agentfs.format.segment import FIRST_RECORD_KIND, Record

from .limits import durable_write, percentile


def measure(workdir: Path, n: int, size: int, pace_ms: float) -> dict[str, float]:
    floor_dir = workdir / "floor"
    floor_dir.mkdir()
    floor, append = [], []
    with SegmentWriter(workdir / "segments", workdir / "locks") as writer:
        for i in range(n):
            data = os.urandom(size)
            t = time.perf_counter()
            durable_write(floor_dir, f"f{i:06d}", data)
            floor.append((time.perf_counter() - t) * 1000)
            time.sleep(pace_ms / 1000)
            record = Record(FIRST_RECORD_KIND, f"r{i:06d}".encode(), data)
            t = time.perf_counter()
            writer.append([record])
            append.append((time.perf_counter() - t) * 1000)
            time.sleep(pace_ms / 1000)
    return {
        "floor_median_ms": statistics.median(floor),
        "floor_p99_ms": percentile(floor, 99),
        "append_median_ms": statistics.median(append),
        "append_p99_ms": percentile(append, 99),
        "ratio_median": statistics.median(append) / statistics.median(floor),
    }


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.segment_append", description=__doc__)
    parser.add_argument("--n", type=int, default=300)
    parser.add_argument("--size", type=int, default=10_000)
    parser.add_argument("--pace-ms", type=float, default=0.0)
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="agentfs-segments-", dir=args.workdir) as workdir:
        figures = measure(Path(workdir), args.n, args.size, args.pace_ms)
    for name, value in figures.items():
        print(f"{name:18} {value:8.3f}")


if __name__ == "__main__":
    main()
