"""An --on-commit command for the tests: records how it was called, then exits.

    python record_hook.py LOG [ARG...]

Appends one JSON line to LOG: {"argv": [ARG...], "run", "checkpoint", "store" (the AGENTFS_*
variables), "pid", "time_ns"}. Behaviour by the first ARG (the run, in the tests' commands):
a run whose name contains "fail" exits 3; one containing "slow" first appends {"started": ...}
and sleeps $HOOK_SLEEP seconds (default 1.5) before recording.
"""

from __future__ import annotations

import json
import os
import sys
import time


def append(path: str, record: dict[str, object]) -> None:
    with open(path, "a") as handle:  # one small write per line: appends from processes do not interleave
        handle.write(json.dumps(record) + "\n")


def main() -> int:
    log, args = sys.argv[1], sys.argv[2:]
    run = args[0] if args else ""
    if "slow" in run:
        append(log, {"started": args, "pid": os.getpid()})
        time.sleep(float(os.environ.get("HOOK_SLEEP", "1.5")))
    append(
        log,
        {
            "argv": args,
            "run": os.environ.get("AGENTFS_RUN"),
            "checkpoint": os.environ.get("AGENTFS_CHECKPOINT"),
            "store": os.environ.get("AGENTFS_STORE"),
            "pid": os.getpid(),
            "time_ns": time.time_ns(),
        },
    )
    return 3 if "fail" in run else 0


if __name__ == "__main__":
    sys.exit(main())
