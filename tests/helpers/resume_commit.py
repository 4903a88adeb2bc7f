"""A machine that resumes a run from a remote, commits on its head, and pushes (for the clock-skew test).

    python resume_commit.py STORE URL RUN

Opens STORE with `remote=URL`, prints "ready <head id>", waits for a line on stdin so that
several machines commit at the same moment, commits on that head, pushes, and prints "pushed <id>".
"""

from __future__ import annotations

import sys

import agentfs


def main() -> int:
    store_path, url, run_name = sys.argv[1:4]
    with agentfs.open(store_path, remote=url) as store:
        run = store.run(run_name)
        head = run.latest()
        assert head is not None, "nothing to resume"
        print("ready", head.id, flush=True)
        sys.stdin.readline()
        made = run.commit({"resumed_from": head.id}, parent=head.id)
        with store.sync(url) as daemon:
            if not daemon.flush(timeout=20):
                print("push timed out", flush=True)
                return 1
        print("pushed", made.id, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
