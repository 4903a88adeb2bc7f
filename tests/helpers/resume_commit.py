"""A machine that resumes a run from a remote, commits on its head, and pushes (for the clock-skew test).

    python resume_commit.py STORE URL RUN

Opens STORE with `remote=URL`, prints "ready <head id>", waits for a line on stdin so that
several machines commit at the same moment, commits on that head and prints "committed <id>", waits
for a second line, pushes, and prints "pushed <id>".

The second wait keeps every machine's push after every machine's commit. A store opened with `remote=`
reads the remote's head at each commit (Repository.head), so a machine that commits after another has
pushed sees that commit as the head and raises Conflict, which is right, but not the race these tests
make: the clock-skew test failed so under load, one machine's commit landing after another's push.
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
        print("committed", made.id, flush=True)
        sys.stdin.readline()
        with store.sync(url) as daemon:
            if not daemon.flush(timeout=20):
                print("push timed out", flush=True)
                return 1
        print("pushed", made.id, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
