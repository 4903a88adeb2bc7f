"""The cost of the daemon's reconciliation (`agentfs sync --recheck`) on moto, per N checkpoints.

    python -m benchmarks.reconcile_cost [--n 10000] [--lose 0.1]

Commits N small checkpoints, pushes them to moto's S3 (as packs), then times two rechecks and
counts the requests moto received for each: one on the intact remote (what the daemon pays every
--reconcile-interval), and one after deleting a fraction `--lose` of the packs, at least one, with
their indexes (detection plus the re-push). Not part of `python -m benchmarks`: minutes at N = 10,000.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import agentfs
from agentfs.format import keys
from agentfs.sync.pack_remote import PackRemote
from agentfs.sync.push import Pusher
from agentfs.sync.reconcile import recheck

from .s3 import MotoServer


def measure(workdir: Path, moto: MotoServer, n: int, lose: float) -> dict[str, object]:
    url = moto.bucket("reconcile-cost") + "/p"
    with agentfs.open(workdir / "store", durability="process") as store:
        run = store.run("r")
        for step in range(n):
            run.commit({"step": step})
        pusher = Pusher(store.engine, PackRemote(url, moto.storage_options))
        started = time.monotonic()
        pusher.push()
        push_seconds = time.monotonic() - started
        results: dict[str, object] = {"checkpoints": n, "push_seconds": round(push_seconds, 2)}
        for case in ("intact", "lost"):
            if case == "lost":
                fs = moto.fs()
                packs = sorted(key for key in fs.find(url.removeprefix("s3://") + "/" + keys.PACKS) if key.endswith(".pack"))
                lost = packs[: max(1, int(len(packs) * lose))]
                fs.rm(lost + [key.removesuffix(".pack") + ".idx" for key in lost])
                results["packs_lost"] = f"{len(lost)} of {len(packs)}"
            before = moto.stats()
            started = time.monotonic()
            report = recheck(pusher)
            seconds = time.monotonic() - started
            requests = moto.stats() - before
            results[case] = {"seconds": round(seconds, 3), "requests": requests.requests, "found_lost": report.lost_entries}
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--lose", type=float, default=0.1)
    args = parser.parse_args()
    moto = MotoServer()
    try:
        with tempfile.TemporaryDirectory() as workdir:
            print(json.dumps(measure(Path(workdir), moto, args.n, args.lose), indent=2))
    finally:
        moto.close()


if __name__ == "__main__":
    main()
