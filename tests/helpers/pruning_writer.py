"""A writer that reuses content while pruning: the hard case for a remote gc racing a pusher.

    python pruning_writer.py STORE RUN COUNT PAUSE_SECONDS

Each step commits one of 6 large values (by step % 6) plus the step; every 4 steps it prunes the
run to its newest 2 checkpoints and runs a local gc, so objects leave and come back locally while
the remote may still (or no longer) hold them. Prints "<id> <step>" per commit.
"""

from __future__ import annotations

import random
import sys
import time

import agentfs


def blob(kind: int) -> bytes:
    return random.Random(kind).randbytes(40_000)


def main() -> int:
    store = agentfs.open(sys.argv[1], durability="process")
    run = store.run(sys.argv[2])
    for step in range(int(sys.argv[3])):
        cp = run.commit({"step": step, "blob": blob(step % 6)})
        print(cp.id, step, flush=True)
        time.sleep(float(sys.argv[4]))
        if step % 4 == 3:
            run.prune(keep_last=2)
            store.gc(grace=0)
    return 0


if __name__ == "__main__":
    sys.exit(main())
