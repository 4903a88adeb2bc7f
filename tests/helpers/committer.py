"""A process that commits checkpoints on cue, for the watch and on-commit tests.

    python committer.py STORE RUN[,RUN...] COUNT [--interval S] [--durability power|process]

Opens the store, prints "ready" and waits for a line on stdin (so the parent can start watching
first). Then commits COUNT checkpoints, cycling through the runs, sleeping S seconds between
commits, and after each commit returns prints "<run> <id> <time_ns>" (time.time_ns() when
commit returned), flushed. Prints "done" at the end.
"""

from __future__ import annotations

import argparse
import sys
import time

import agentfs


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("store")
    parser.add_argument("runs")
    parser.add_argument("count", type=int)
    parser.add_argument("--interval", type=float, default=0.0)
    parser.add_argument("--durability", default="power")
    args = parser.parse_args()

    store = agentfs.open(args.store, durability=args.durability)
    runs = [store.run(name) for name in args.runs.split(",")]
    print("ready", flush=True)
    if not sys.stdin.readline():
        return 1  # the parent went away
    for i in range(args.count):
        if i and args.interval:
            time.sleep(args.interval)
        run = runs[i % len(runs)]
        checkpoint = run.commit({"i": i, "run": run.name})
        print(f"{run.name} {checkpoint.id} {time.time_ns()}", flush=True)
    print("done", flush=True)
    store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
