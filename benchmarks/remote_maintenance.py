"""The cost of `verify --remote` and `gc --remote` on moto, at N checkpoints.

    python -m benchmarks.remote_maintenance [--n 10000] [--quick]

Commits N small checkpoints (a fifth of them with a 4 KB artifact of their own), pushes them to
moto's S3, retires half of them (`prune`, pushed), then times and counts the requests moto received
for: `verify --remote` (entries and references), `verify --remote --deep` (every object's bytes
too), and `gc --remote` (settle time at its minimum, 3 s, included in its seconds and reported
apart). `--quick` is N = 500. Not part of `python -m benchmarks`: minutes at N = 10,000.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import agentfs
from agentfs.sync.pack_remote import PackRemote
from agentfs.sync.push import Pusher
from agentfs.sync.remote_gc import MIN_SETTLE, remote_gc
from agentfs.sync.remote_verify import verify_remote

from .s3 import MotoServer


def timed(moto: MotoServer, action: Callable[[], Any]) -> tuple[Any, dict[str, Any]]:
    before = moto.stats()
    started = time.monotonic()
    result = action()
    seconds = time.monotonic() - started
    requests = moto.stats() - before
    return result, {"seconds": round(seconds, 3), "requests": sum(requests.requests.values()), "by_method": requests.requests}


def measure(workdir: Path, moto: MotoServer, n: int) -> dict[str, Any]:
    url = moto.bucket("remote-maintenance") + "/p"
    results: dict[str, Any] = {"checkpoints": n}
    with agentfs.open(workdir / "store", durability="process") as store:
        run = store.run("r")
        for step in range(n):
            run.commit({"step": step}, artifacts={"a.bin": os.urandom(4096)} if step % 5 == 0 else None)
        started = time.monotonic()
        Pusher(store.engine, PackRemote(url, moto.storage_options)).push()
        results["push_seconds"] = round(time.monotonic() - started, 2)
        run.prune(keep_last=n // 2)
        Pusher(store.engine, PackRemote(url, moto.storage_options)).push()
        report, results["verify"] = timed(moto, lambda: verify_remote(PackRemote(url, moto.storage_options)))
        results["verify"]["ok"] = report.ok
        report, results["verify_deep"] = timed(moto, lambda: verify_remote(PackRemote(url, moto.storage_options), deep=True))
        results["verify_deep"]["ok"] = report.ok
        gc, results["gc"] = timed(
            moto, lambda: remote_gc(PackRemote(url, moto.storage_options), store.engine, grace=0.0, settle=MIN_SETTLE)
        )
        results["gc"].update(settle_seconds=MIN_SETTLE, entries_deleted=gc.entries_deleted, objects_deleted=gc.objects_deleted)
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--quick", action="store_true", help="N = 500")
    args = parser.parse_args()
    moto = MotoServer()
    try:
        with tempfile.TemporaryDirectory() as workdir:
            print(json.dumps(measure(Path(workdir), moto, 500 if args.quick else args.n), indent=2))
    finally:
        moto.close()


if __name__ == "__main__":
    main()
