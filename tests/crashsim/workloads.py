"""Workloads for the crash-state test, run as real processes under strace (public API only).

`python -m tests.crashsim.workloads NAME DIR [--setup]` works on the store DIR/store and marks each
acknowledged call with `trace.ack(...)` the moment it returns. A workload in SETUPS first runs its
setup untraced (with --setup); what that leaves counts as durable. With AGENTFS_CRASHSIM_PLANT set,
`plants` disables one fsync call site first (planted bugs, see plants.py; the upgrade's are
segment_workloads.PLANTS).

The `upgrade` workload (format 1 -> 2) works on DIR/store without opening it (PATH_WORKLOADS): its
setup copies the format-1 test store there, the workload upgrades it and acks; upgrade_check.py checks it.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import agentfs
from agentfs.engine.upgrade import upgrade

from ..helpers.format1_store import extract
from . import plants
from .segment_workloads import PLANTS as SEGMENT_PLANTS
from .trace import ack

ARTIFACT = random.Random(7).randbytes(300_000)  # several chunks, so a tree of objects
ROLLOVER_ARTIFACT = random.Random(8).randbytes(1_100_000)  # past SEAL_AT: a clean close seals the segment
RESTART_STATE = {"step": 1, "same": "in every process"}


def digest(value: Any) -> str:
    """How acks and the checker name a state or a result: sha256 of its canonical JSON."""
    return hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()


def ack_commit(checkpoint: agentfs.Checkpoint, call: str = "commit") -> None:
    artifacts = {name: hashlib.sha256(art.read_bytes()).hexdigest() for name, art in checkpoint.artifacts.items()}
    ack({"call": call, "run": checkpoint.run, "id": checkpoint.id, "state": digest(checkpoint.state), "artifacts": artifacts})


def ack_once(run: agentfs.Run, key: str, value: Any) -> None:
    ack({"call": "once", "run": run.name, "key": key, "result": digest(value)})


def commit(store: agentfs.Store) -> None:
    run = store.run("w/main")
    for step in range(3):
        ack_commit(run.commit({"step": step, "notes": "n" * step, "fixed": "same every time"}))
    ack_commit(run.commit({"step": 3}, artifacts={"model.bin": ARTIFACT, "log.txt": b"trained\n"}))
    ack_commit(run.commit({"step": 4}, artifacts={"model.bin": ARTIFACT}))  # deduplicated against step 3


def encrypted(store: agentfs.Store) -> None:
    """Commits and journal calls in an encrypted store: each batch's small records lie in one GROUP record."""
    commit(store)
    once(store)


def encryption(root: Path, name: str) -> agentfs.Encryption | None:
    """The key of an encrypted workload's store (made with it, or found holding key slots), else None."""
    if name in ENCRYPTED or (root / "keys").is_dir():
        return agentfs.Encryption(passphrase="crash states", scrypt_n=1 << 10)
    return None


def fork(store: agentfs.Store) -> None:
    source = store.run("w/src")
    ack_commit(source.commit({"turn": 1}, artifacts={"a.txt": b"first"}))
    head = source.commit({"turn": 2, "history": ["a", "b"]})
    ack_commit(head)
    target = source.fork(head.id, "w/dst")
    latest = target.latest()
    assert latest is not None
    ack_commit(latest, "fork")
    ack_commit(target.commit({"turn": 3, "branch": "dst"}))


def once(store: agentfs.Store) -> None:
    run = store.run("w/tools")
    for key, value in (("search", {"hits": [1, 2, 3]}), ("fetch", "page body")):
        ack_once(run, key, run.once(key, lambda v=value: v))
    ack_once(run, "search", run.once("search", _must_not_run))  # the recorded result


def _must_not_run() -> None:
    raise AssertionError("once ran a call that had already succeeded")


def prune_gc_setup(store: agentfs.Store) -> None:
    run = store.run("w/old")
    for step in range(5):
        run.commit({"step": step}, artifacts={"out.bin": random.Random(step).randbytes(20_000)})


def prune_gc(store: agentfs.Store) -> None:
    run = store.run("w/old")
    report = run.prune(keep_last=2)
    ack({"call": "prune", "run": run.name, "removed": sorted(report.removed), "kept": run.ids()})
    store.gc(grace=0)
    ack({"call": "gc"})
    ack_commit(run.commit({"step": 5}, artifacts={"out.bin": random.Random(4).randbytes(20_000)}))


def two_writers(store: agentfs.Store) -> None:
    """Two processes commit to one run at once."""
    children = [_spawn("writer", store.root, str(number)) for number in range(2)]
    for child in children:
        if child.wait(timeout=120) != 0:
            raise RuntimeError(f"writer process {child.args!r} failed with {child.returncode}")


def writer(store: agentfs.Store, number: str) -> None:
    run = store.run("w/shared")
    for step in range(3):
        ack_commit(run.commit({"writer": number, "step": step, "common": "x" * 100}))


def restart(store: agentfs.Store) -> None:
    """Processes SIGKILLed at a precise point each (see plants.KILL_POINTS), then one that reuses their work.

    The last one adopts their segment (the same writer slot), commits the same state and artifact
    (deduplicated against objects a killed process wrote) and gets the `once` result a killed process
    recorded: what it acknowledges must not rest on anything they left unsynced.
    """
    for point in plants.KILL_POINTS:
        killed = _spawn("killed", store.root, point)
        if killed.wait(timeout=120) != -signal.SIGKILL:
            raise RuntimeError(f"the process to kill at {point!r} exited with {killed.returncode}")
    run = store.run("w/restart")
    ack_commit(run.commit(RESTART_STATE, artifacts={"model.bin": ARTIFACT}))
    tools = store.run("w/restart-tools")
    ack_once(tools, "tool", tools.once("tool", _must_not_run))


def killed(store: agentfs.Store, point: str) -> None:
    plants.KILL_POINTS[point]()
    run = store.run("w/restart")
    run.commit(RESTART_STATE, artifacts={"model.bin": ARTIFACT})
    store.run("w/restart-tools").once("tool", lambda: {"answer": 42})
    raise RuntimeError(f"kill point {point!r} was never reached")


def rollover(store: agentfs.Store) -> None:
    """A segment past the seal size closed (sealed, its seal copy published), then a new segment made aside in
    tmp/ and linked into segments/ by the next process's first commit: no crash state may lose an acknowledged
    commit, show a segment without its header, or a sealed segment its seal copy calls damaged."""
    run = store.run("w/roll")
    ack_commit(run.commit({"step": 0}, artifacts={"big.bin": ROLLOVER_ARTIFACT}))
    store.close()  # 1 MiB or more: sealed, and its seal copy written
    with agentfs.open(store.root) as again:
        ack_commit(again.run("w/roll").commit({"step": 1}, artifacts={"small.bin": b"after the seal"}))


def snapshots(store: agentfs.Store) -> None:
    """Index snapshots of the live writer's segment, one every 4 KiB here (256 KiB by default): no crash state may
    lose an acknowledged commit, whether it kept a snapshot, a torn one or none, and a store opened there (through
    the snapshot, checker) must read every commit and continue after the last (FORMAT.md "Index snapshots")."""
    store.engine._segment_writer().snapshot_bytes = 4096  # the one private knob: the default needs 256 KiB of commits
    run = store.run("w/snap")
    for step in range(8):
        ack_commit(run.commit({"step": step, "blob": random.Random(step).randbytes(1250).hex()}))


def reuse(store: agentfs.Store) -> None:
    """Another live writer (durability "process": nothing synced) commits and records a call; this
    process, in another writer slot, commits after its entry, deduplicates against its objects and
    gets its recorded `once` result: what it acknowledges must not rest on the other's unsynced bytes."""
    other = _spawn("unsynced", store.root, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert other.stdout is not None and other.stdin is not None
    if other.stdout.readline() != b"ready\n":
        raise RuntimeError("the unsynced writer failed")
    run = store.run("w/reuse")
    ack_commit(run.commit(RESTART_STATE, artifacts={"model.bin": ARTIFACT}))
    ack_once(run, "tool", run.once("tool", _must_not_run))
    other.stdin.close()
    other.wait(timeout=60)


def unsynced(store: agentfs.Store) -> None:
    with agentfs.open(store.root, durability="process") as own:  # opened first: it takes the first writer slot
        run = own.run("w/reuse")
        run.commit({"step": 0}, artifacts={"model.bin": ARTIFACT})
        run.once("tool", lambda: {"answer": 42})
        print("ready", flush=True)
        sys.stdin.read()


def _spawn(name: str, root: Path, *args: str, **options: Any) -> subprocess.Popen[bytes]:
    module = __spec__.name if __spec__ is not None else __name__  # run with -m, __name__ is "__main__"
    return subprocess.Popen([sys.executable, "-m", module, name, str(root.parent), *args], **options)


def upgrade_setup(root: Path) -> None:
    extract(root.parent).rename(root)


def upgrade_workload(root: Path) -> None:
    upgrade(root)
    ack({"call": "upgrade"})


WORKLOADS: dict[str, Callable[..., None]] = {
    "commit": commit,
    "fork": fork,
    "once": once,
    "prune_gc": prune_gc,
    "two_writers": two_writers,
    "restart": restart,
    "writer": writer,
    "killed": killed,
    "reuse": reuse,
    "rollover": rollover,
    "snapshots": snapshots,
    "unsynced": unsynced,
    "encrypted": encrypted,
}
ENCRYPTED = ("encrypted",)  # workloads run on an encrypted store
SETUPS: dict[str, Callable[[agentfs.Store], None]] = {"prune_gc": prune_gc_setup}
# workloads on a store that agentfs.open must not open first (a format-1 store)
PATH_WORKLOADS: dict[str, Callable[[Path], None]] = {"upgrade": upgrade_workload}
PATH_SETUPS: dict[str, Callable[[Path], None]] = {"upgrade": upgrade_setup}
# the ones a test runs
SCENARIOS = ("commit", "fork", "once", "prune_gc", "two_writers", "restart", "reuse", "rollover", "snapshots", "encrypted")


def main(argv: list[str]) -> None:
    name, directory, *rest = argv
    plant = os.environ.get(plants.ENV)
    root = Path(directory) / "store"
    if name in PATH_WORKLOADS:
        if plant is not None:
            SEGMENT_PLANTS[plant]()  # the upgrade writes through the segment writer: its plants apply
        (PATH_SETUPS if rest == ["--setup"] else PATH_WORKLOADS)[name](root)
        return
    plants.apply(plant)
    with agentfs.open(root, encryption=encryption(root, name)) as store:
        if rest == ["--setup"]:
            SETUPS[name](store)
        else:
            WORKLOADS[name](store, *rest)


if __name__ == "__main__":
    main(sys.argv[1:])
