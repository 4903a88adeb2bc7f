"""Open a store (or resume one from a remote) and read one checkpoint's state, and artifacts whole, in this
fresh process; print, for each read in turn, what happened and the peak memory it cost as a JSON list
(bombs.peak_after): [{"outcome", "peak_over_baseline"}, ...] (the state first, then each --artifact).

    python -m tests.helpers.huge_record STORE RUN CHECKPOINT_ID [--artifact NAME]... [--remote URL OPTIONS_JSON]

The process's address space is capped at 1 GiB over what it maps after imports, so a read that would
allocate gigabytes ends in a MemoryError (which the test sees as a failure) instead of thrashing the machine.
"""

from __future__ import annotations

import argparse
import json
import resource

import agentfs
from tests.helpers.bombs import _status, peak_after

HEADROOM = 1 << 30


def read(args: argparse.Namespace, artifact: str | None) -> bytes:
    remote, options = (args.remote[0], json.loads(args.remote[1])) if args.remote else (None, None)
    with agentfs.open(args.store, create=remote is not None, remote=remote, storage_options=options) as store:
        checkpoint = store.run(args.run).get(args.checkpoint)
        return checkpoint.artifacts[artifact].read_bytes() if artifact else repr(checkpoint.state).encode()


if __name__ == "__main__":
    parser = argparse.ArgumentParser()
    parser.add_argument("store")
    parser.add_argument("run")
    parser.add_argument("checkpoint")
    parser.add_argument("--artifact", action="append", default=[])
    parser.add_argument("--remote", nargs=2, metavar=("URL", "OPTIONS_JSON"))
    arguments = parser.parse_args()
    limit = _status("VmSize") + HEADROOM
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    reads = [None, *arguments.artifact]
    print(json.dumps([json.loads(peak_after(lambda name=name: read(arguments, name))) for name in reads]))
