"""A writer process for the crash, concurrency and gc tests.

    python writer.py STORE RUN [--durability power|process] [--tag T] [--count N] [--resume] [--go]
    python writer.py STORE RUN --parent ID|none [--go]

Prints "ready" once imported, waits for a line on stdin with --go, opens the store, prints
"started", then commits
workload.make_state(step, tag) (with its artifacts and metadata) and prints "<id> <step>" after each
commit returns, flushed, so that the parent knows exactly which commits returned. --resume starts at
the step after the run's latest checkpoint. With --parent, makes one commit with that parent and
prints "ok <id>" or "conflict <message>".
"""

from __future__ import annotations

import argparse
import sys

import workload

import agentfs


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("store")
    parser.add_argument("run")
    parser.add_argument("--durability", default="power")
    parser.add_argument("--tag", default="")
    parser.add_argument("--count", type=int, default=-1)
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--go", action="store_true")
    parser.add_argument("--parent")
    args = parser.parse_args()

    print("ready", flush=True)
    if args.go and not sys.stdin.readline():
        return 1  # the parent went away
    store = agentfs.open(args.store, durability=args.durability)
    run = store.run(args.run)
    step = 0
    if args.resume:
        latest = run.latest()
        step = 0 if latest is None else latest.state["step"] + 1
    print("started", flush=True)

    if args.parent is not None:
        parent = None if args.parent == "none" else args.parent
        try:
            cp = run.commit(workload.make_state(0, args.tag), metadata=workload.make_metadata(0, args.tag), parent=parent)
        except agentfs.Conflict as exc:
            print(f"conflict {exc}", flush=True)
        else:
            print(f"ok {cp.id}", flush=True)
        return 0

    done = 0
    while done != args.count:
        cp = run.commit(
            workload.make_state(step, args.tag),
            artifacts=workload.make_artifacts(step, args.tag),
            metadata=workload.make_metadata(step, args.tag),
        )
        print(f"{cp.id} {step}", flush=True)
        step += 1
        done += 1
    store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
