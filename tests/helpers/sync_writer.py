"""A committing process for the sync tests, driven line by line from stdin.

    python sync_writer.py STORE RUN

Prints "ready" once the store is open. Then, for each line read:
    "commit N"  commits N checkpoints (state {"n": i, "blob": <deterministic bytes>}) and prints
                "<id> <i>" after each commit returns, then "done" (all flushed);
    "quit"      (or end of input) closes the store and exits 0.
States come from `state(i)` so a test can recompute them.
"""

from __future__ import annotations

import random
import sys
from typing import Any

import agentfs


def state(i: int) -> dict[str, Any]:
    rng = random.Random(f"sync-writer/{i}")
    return {"n": i, "blob": rng.randbytes(rng.randint(500, 30_000))}


def main() -> int:
    store = agentfs.open(sys.argv[1])
    run = store.run(sys.argv[2])
    print("ready", flush=True)
    i = 0
    for line in sys.stdin:
        words = line.split()
        if not words or words[0] == "quit":
            break
        if words[0] != "commit":
            print(f"unknown command {line!r}", flush=True)
            return 2
        for _ in range(int(words[1])):
            cp = run.commit(state(i))
            print(f"{cp.id} {i}", flush=True)
            i += 1
        print("done", flush=True)
    store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
