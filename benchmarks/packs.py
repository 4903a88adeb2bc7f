"""Format 2's remote on moto's S3 (its own process, counting requests): the three figures of issue 10.

    python -m benchmarks.packs [--small 1000] [--artifact-mib 256]

1. push of `--small` small checkpoints as packs / sequential s3fs puts of the same records (one
   PUT per object and per entry, as format 1 laid them out): a speed ratio, >= 5x wanted;
2. push of a `--artifact-mib` artifact as packs / s3fs `put_file` of the same file (medians of 3
   alternated rounds): >= 2x wanted;
3. requests moto receives while a fresh store opened on that remote resumes the artifact's
   checkpoint (open, latest(), read the artifact whole): <= 100 wanted.
All in one run, on one moto server. Not part of `python -m benchmarks`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import agentfs
from agentfs.sync.pack_remote import PackRemote
from agentfs.sync.push import Pusher

from .s3 import MotoServer

ROUNDS = 3


def small_push(workdir: Path, moto: MotoServer, n: int) -> dict[str, float]:
    with agentfs.open(workdir / "small", durability="process") as store:
        run = store.run("r")
        for step in range(n):
            run.commit({"step": step, "note": f"checkpoint {step}"})
        fs = moto.fs()
        base = moto.bucket("sequential") + "/p"
        started = time.monotonic()
        for oid in store.engine.db.oids():
            fs.pipe_file(f"{base}/objects/{oid.hex()}", store.engine.db.read_raw(oid))  # one key per record, as format 1 did
        for run, checkpoint_id in store.engine.local_entries():
            fs.pipe_file(f"{base}/runs/{run}/log/{checkpoint_id}", store.engine.local_entry(run, checkpoint_id) or b"")
        sequential = time.monotonic() - started
        started = time.monotonic()
        Pusher(store.engine, PackRemote(moto.bucket("packs-small") + "/p", moto.storage_options)).push()
        packed = time.monotonic() - started
    return {
        "checkpoints": n,
        "sequential_s3fs_s": round(sequential, 3),
        "packs_s": round(packed, 3),
        "speedup": round(sequential / packed, 2),
    }


def artifact_push_and_resume(workdir: Path, moto: MotoServer, mib: int) -> dict[str, float]:
    blob_path = workdir / "artifact.bin"
    with open(blob_path, "wb") as handle:
        for _ in range(mib):
            handle.write(os.urandom(1 << 20))
    fs = moto.fs()
    put_files, pushes = [], []
    with agentfs.open(workdir / "big", durability="process") as store:
        cp = store.run("r").commit({"artifact": True}, artifacts={"artifact.bin": blob_path})
        for attempt in range(ROUNDS):  # alternated, each on an emptied remote: moto on 2 shared cores is noisy
            target = moto.bucket("put-file") + "/artifact.bin"
            started = time.monotonic()
            fs.put_file(str(blob_path), target)
            put_files.append(time.monotonic() - started)
            fs.rm(target)
            url = moto.bucket(f"packs-big-{attempt}") + "/p"
            started = time.monotonic()
            stats = Pusher(store.engine, PackRemote(url, moto.storage_options)).push()
            pushes.append(time.monotonic() - started)
            if attempt < ROUNDS - 1:
                fs.rm(url, recursive=True)
    put_file, packed = statistics.median(put_files), statistics.median(pushes)
    before = moto.stats()
    started = time.monotonic()
    with agentfs.open(workdir / "resumed", remote=url, storage_options=moto.storage_options, durability="process") as resumed:
        latest = resumed.run("r").latest()
        size = sum(len(chunk) for chunk in iter(latest.artifacts["artifact.bin"].open().read1, b""))
    resume_seconds = time.monotonic() - started
    requests = moto.stats() - before
    assert latest.id == cp.id and size == mib << 20
    return {
        "artifact_mib": mib,
        "rounds": ROUNDS,
        "s3fs_put_file_s": round(put_file, 3),  # medians
        "packs_s": round(packed, 3),
        "speedup": round(put_file / packed, 2),
        "packs_bytes": stats.bytes,
        "resume_requests": sum(requests.requests.values()),
        "resume_requests_by_method": requests.requests,  # type: ignore[dict-item]
        "resume_s": round(resume_seconds, 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.packs", description=__doc__)
    parser.add_argument("--small", type=int, default=1000)
    parser.add_argument("--artifact-mib", type=int, default=256)
    args = parser.parse_args()
    moto = MotoServer()
    try:
        with tempfile.TemporaryDirectory(prefix="agentfs-packs-") as scratch:
            results = {
                "small": small_push(Path(scratch), moto, args.small),
                "artifact": artifact_push_and_resume(Path(scratch), moto, args.artifact_mib),
            }
    finally:
        moto.close()
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
