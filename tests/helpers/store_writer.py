"""A process that puts items into one AgentFSStore namespace, for the several-writers test.

    python store_writer.py STORE TAG COUNT

Waits for a line on stdin (so that every writer starts at once), then puts COUNT items
("<TAG>-<i>") into the namespace ("shared",) and ("own", TAG), and prints "done".
"""

from __future__ import annotations

import sys

from agentfs.integrations.langgraph import AgentFSStore


def main() -> int:
    path, tag, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
    with AgentFSStore(path) as store:
        sys.stdin.readline()
        for i in range(count):
            store.put(("shared",), f"{tag}-{i}", {"writer": tag, "i": i})
            store.put(("own", tag), f"{tag}-{i}", {"i": i})
    print("done", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
