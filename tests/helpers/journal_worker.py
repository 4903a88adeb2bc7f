"""A journaled worker for the journal tests.

    python journal_worker.py STORE RUN SIDEFILE [--count N] [--sleep-ms MS] [--go]

Opens the store (after a line on stdin with --go) and prints "ready"; then, for i in 0..N-1, calls
run.once(f"k{i}", side_effect, i). side_effect appends "k{i}\\n" to SIDEFILE (O_APPEND, fsync),
sleeps MS milliseconds and returns {"i": i, "sq": i * i}. After each call it prints
"ok k{i} <result as JSON>" once once() returned, or "inflight k{i}" when it raised InFlight, flushed,
so that the parent knows exactly which calls returned. Ends with "done".
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import agentfs


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("store")
    parser.add_argument("run")
    parser.add_argument("sidefile")
    parser.add_argument("--count", type=int, default=100)
    parser.add_argument("--sleep-ms", type=float, default=0.0)
    parser.add_argument("--go", action="store_true")
    args = parser.parse_args()

    def side_effect(i: int) -> dict[str, int]:
        fd = os.open(args.sidefile, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, f"k{i}\n".encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        time.sleep(args.sleep_ms / 1000)
        return {"i": i, "sq": i * i}

    if args.go and not sys.stdin.readline():
        return 1  # the parent went away
    run = agentfs.open(args.store).run(args.run)
    print("ready", flush=True)
    for i in range(args.count):
        key = f"k{i}"
        try:
            result = run.once(key, side_effect, i)
        except agentfs.InFlight:
            print(f"inflight {key}", flush=True)
        else:
            print(f"ok {key} {json.dumps(result)}", flush=True)
    print("done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
