"""The daemon's CPU per idle cycle and the sync lag, for two agentfs trees in the same run, alternated.

    git archive a3ce79b agentfs | tar -x -C /tmp/before
    python -m benchmarks.before_after --tree before=/tmp/before --tree now=. [--checkpoints 10000] [--seconds 60]

Idle CPU: a store of N checkpoints (made and pushed to a file remote once per tree), then a process
that only runs the sync daemon (`store.sync(URL, interval=1)`, a full rescan a second) with nothing
committed; the process's CPU seconds (utime + stime from /proc/PID/stat) over `--seconds`, per
rescan cycle. (The API, not `agentfs sync --watch`: a3ce79b's CLI needs installed package metadata.)
Sync lag: workload 5 (benchmarks/workloads/sync_lag.py: 100 commits at 10/s to moto, lag from the
server's PUT times). Every measurement runs in a child process whose PYTHONPATH puts the tree's
`agentfs` first and this checkout's `benchmarks` after it. Not part of `python -m benchmarks`:
minutes at N = 10,000.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BENCHMARKS_ROOT = Path(__file__).resolve().parent.parent
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
CYCLE_SECONDS = 1.0

MAKE_STORE = (
    "import sys, agentfs\n"
    "with agentfs.open(sys.argv[1], durability='process') as store:\n"
    "    run = store.run('idle')\n"
    "    for step in range(int(sys.argv[2])):\n"
    "        run.commit({'step': step})\n"
    "    with store.sync(sys.argv[3]) as daemon:\n"
    "        assert daemon.flush(timeout=600), 'the first push did not finish'\n"
)

RUN_DAEMON = (
    "import sys, agentfs\n"
    "with agentfs.open(sys.argv[1]) as store, store.sync(sys.argv[2], interval=float(sys.argv[3])) as daemon:\n"
    "    assert daemon.flush(timeout=60)\n"
    "    print('idle', flush=True)\n"
    "    sys.stdin.readline()\n"
)

SYNC_LAG = (
    "import json, sys, tempfile\n"
    "from pathlib import Path\n"
    "from benchmarks.context import FULL, Context\n"
    "from benchmarks.report import Report\n"
    "from benchmarks.workloads import sync_lag\n"
    "from benchmarks.workloads.common import median, p99\n"
    "with tempfile.TemporaryDirectory() as workdir:\n"
    "    ctx = Context(FULL, Report('before_after', Path(workdir)), Path(workdir), quick=False)\n"
    "    result = sync_lag.agentfs_side(ctx)\n"
    "    ctx.moto().close()\n"
    "lags = result['lags']\n"
    "print(json.dumps({'median_s': median(lags), 'p99_s': p99(lags), 'missing': result['missing']}))\n"
)


def tree_env(tree: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": f"{tree}{os.pathsep}{BENCHMARKS_ROOT}"}


def cpu_seconds(pid: int) -> float:
    # fields 14 and 15 of /proc/PID/stat (utime, stime) in clock ticks; the name (field 2) may hold spaces
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def prepare_idle_store(tree: Path, workdir: Path, checkpoints: int) -> tuple[Path, str]:
    store, remote = workdir / "store", workdir / "remote"
    env = tree_env(tree)
    make = [sys.executable, "-c", MAKE_STORE, str(store), str(checkpoints), remote.as_uri()]
    subprocess.run(make, env=env, cwd=workdir, check=True, timeout=1200)
    return store, remote.as_uri()


def idle_cpu(tree: Path, workdir: Path, store: Path, url: str, seconds: float) -> dict[str, float]:
    daemon = subprocess.Popen(
        [sys.executable, "-c", RUN_DAEMON, str(store), url, str(CYCLE_SECONDS)],
        env=tree_env(tree),
        cwd=workdir,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert daemon.stdin is not None and daemon.stdout is not None
    try:
        assert daemon.stdout.readline().strip() == "idle"
        time.sleep(2)  # start-up and its first scan are not idle cycles
        start_cpu, started = cpu_seconds(daemon.pid), time.monotonic()
        time.sleep(seconds)
        used, elapsed = cpu_seconds(daemon.pid) - start_cpu, time.monotonic() - started
        daemon.stdin.write("stop\n")
        daemon.stdin.flush()
        daemon.wait(timeout=60)
    finally:
        if daemon.poll() is None:
            daemon.kill()
    cycles = elapsed / CYCLE_SECONDS
    return {"cpu_seconds": round(used, 3), "seconds": round(elapsed, 1), "cpu_ms_per_cycle": round(1000 * used / cycles, 2)}


def sync_lag(tree: Path, workdir: Path) -> dict[str, float]:
    done = subprocess.run(
        [sys.executable, "-c", SYNC_LAG], env=tree_env(tree), cwd=workdir, check=True, stdout=subprocess.PIPE, text=True, timeout=600
    )
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tree", action="append", required=True, help="NAME=PATH of a tree holding agentfs/ (repeat)")
    parser.add_argument("--checkpoints", type=int, default=10_000)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--rounds", type=int, default=2, help="alternations of the trees")
    args = parser.parse_args()
    trees = {name: Path(path).resolve() for name, path in (spec.split("=", 1) for spec in args.tree)}
    with tempfile.TemporaryDirectory() as scratch:
        idle_stores = {}
        for name, tree in trees.items():
            workdir = Path(scratch) / name
            workdir.mkdir()
            idle_stores[name] = (workdir, *prepare_idle_store(tree, workdir, args.checkpoints))
        for round_number in range(args.rounds):
            for name, tree in trees.items():
                workdir, store, url = idle_stores[name]
                result = {"round": round_number, "tree": name, "idle": idle_cpu(tree, workdir, store, url, args.seconds)}
                result["sync_lag"] = sync_lag(tree, workdir)
                print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
