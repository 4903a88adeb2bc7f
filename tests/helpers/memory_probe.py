"""Commit and read back a large artifact in this process; print peak-RSS increases as JSON.

    python memory_probe.py STORE SOURCE_FILE SCRATCH_DIR DURABILITY

The baseline is the peak RSS after imports and opening the store, before any commit; each figure
is the peak from the start up to the end of that phase, minus the baseline. Two measures:
ru_maxrss (getrusage) and VmHWM (/proc/self/status, this process image only).
"""

from __future__ import annotations

import os
import subprocess
import sys

if __name__ == "__main__" and os.environ.get("_AGENTFS_MEMORY_PROBE") != "1":
    # On Linux a child's ru_maxrss starts at its parent's RSS (exec keeps the larger), so run
    # from pytest it would hide any growth below pytest's own size. Relaunch from this small process.
    os.environ["_AGENTFS_MEMORY_PROBE"] = "1"
    sys.exit(subprocess.call([sys.executable, *sys.argv]))

import hashlib
import json
import resource
import time
from pathlib import Path
from typing import IO

import agentfs

BLOCK = 1 << 20


def maxrss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


def hwm() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def sha256_stream(stream: IO[bytes]) -> str:
    digest = hashlib.sha256()
    while block := stream.read(BLOCK):
        digest.update(block)
    return digest.hexdigest()


def main() -> int:
    root, source, scratch, durability = sys.argv[1:5]
    store = agentfs.open(root, durability=durability)  # type: ignore[arg-type]
    run = store.run("big")
    base_rss, base_hwm = maxrss(), hwm()
    result: dict[str, object] = {"baseline": base_rss, "baseline_hwm": base_hwm}
    clock = time.perf_counter()

    def phase(name: str) -> None:
        nonlocal clock
        result[name] = maxrss() - base_rss
        result[f"{name}_hwm"] = hwm() - base_hwm
        result[f"{name}_seconds"] = round(time.perf_counter() - clock, 2)
        clock = time.perf_counter()

    by_path = run.commit({"step": 0}, artifacts={"big.bin": Path(source)})
    phase("commit_path")

    with open(source, "rb") as handle:
        by_file = run.commit({"step": 1}, artifacts={"big.bin": handle})
    phase("commit_file")
    result["same_ref"] = by_file.artifacts["big.bin"].ref == by_path.artifacts["big.bin"].ref

    # fresh handles, as a resuming process would have
    latest = agentfs.open(root).run("big").latest()
    assert latest is not None
    artifact = latest.artifacts["big.bin"]
    result["size"] = artifact.size
    with artifact.open() as stream:
        result["open_sha256"] = sha256_stream(stream)
    phase("open")

    saved = Path(scratch) / "saved.bin"
    by_path.artifacts["big.bin"].save(saved)
    with open(saved, "rb") as handle:
        result["save_sha256"] = sha256_stream(handle)
    result["saved_size"] = saved.stat().st_size
    saved.unlink()
    phase("save")
    store.close()

    # the instrument itself: 256 MB held at once must show
    ballast = bytearray(256 << 20)
    for i in range(0, len(ballast), 4096):
        ballast[i] = 1
    phase("calibration")
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
