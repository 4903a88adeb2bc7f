"""``python -m benchmarks [--quick] [--only NAME ...]``: measure agentfs next to
its peers and the machine's limits, print the table, write
``benchmarks/results/latest.json`` and ``latest.md``."""

from __future__ import annotations

import argparse
import shutil
import signal
import sys
import tempfile
import time
import traceback
from pathlib import Path

from .context import FULL, QUICK, Context
from .report import Report
from .workloads import WORKLOADS

RESULTS = Path(__file__).resolve().parent / "results"


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    p.add_argument("--quick", action="store_true", help="small sizes: a smoke run of every workload (< 2 minutes)")
    p.add_argument("--only", nargs="+", metavar="NAME", choices=list(WORKLOADS), help="run only these: " + ", ".join(WORKLOADS))
    p.add_argument("--workdir", type=Path, default=None, help="scratch directory (default: a new one under the system temp dir)")
    p.add_argument("--results", type=Path, default=RESULTS, help=f"where latest.json and latest.md go (default: {RESULTS})")
    p.add_argument("--keep", action="store_true", help="keep the scratch directory")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(sys.argv[1:] if argv is None else argv)
    # SIGTERM unwinds like an exception: the moto server stops, scratch files go
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    if args.workdir:
        args.workdir.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="agentfs-bench-", dir=args.workdir))
    command = "python -m benchmarks" + (" --quick" if args.quick else "")
    if args.only:
        command += " --only " + " ".join(args.only)
    report = Report(command, workdir)
    ctx = Context(QUICK if args.quick else FULL, report, workdir, args.quick)
    if ctx.agentfs is None:
        report.note(f"agentfs: not available ({ctx.agentfs_error}); its rows are empty")
    names = args.only or list(WORKLOADS)
    start = time.perf_counter()
    failed = []
    try:
        for name in names:
            print(f"\n== {name}", flush=True)
            t = time.perf_counter()
            try:
                WORKLOADS[name](ctx)
            except Exception as exc:
                traceback.print_exc()
                report.note(f"{name}: failed: {type(exc).__name__}: {exc}")
                failed.append(name)
            print(f"   ({time.perf_counter() - t:.1f} s)", flush=True)
            if not args.keep:
                ctx.clean()
    finally:
        ctx.close()
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    elapsed = time.perf_counter() - start
    print("\n" + report.table())
    missed = [f for f in report.figures if f.goal_met is False]
    print(f"\n{len(report.figures)} figures, {len(missed)} goals missed, {elapsed:.0f} s in all")
    jpath, mpath = report.write(args.results, elapsed)
    print(f"wrote {jpath} and {mpath}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
