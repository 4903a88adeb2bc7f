"""Run a workload under strace, cut its trace at sync and acknowledgement points, check every state.

Cuts: every fsync/fdatasync/sync and every acknowledgement (the op at the cut has happened). At each
cut the checker sees the durable state (nothing unsynced survived) and `samples` other allowed
states (model.States.sample, seeded by the cut); at the end, the process-crash state too.
`max_cuts` bounds a run: every acknowledgement cut is kept (a lost call shows first there), then
sync cuts are sampled with `seed`. None checks every cut.
"""

from __future__ import annotations

import dataclasses
import os
import random
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .model import States, Tree, materialize
from .trace import Op, record

REPO = Path(__file__).resolve().parents[2]
CUT_KINDS = ("fsync", "syncall", "ack")
STORE = "store"


@dataclasses.dataclass
class Finding:
    cut: int  # index of the op the state was cut after
    state: str  # durable | sample N | process crash
    problem: str

    def __str__(self) -> str:
        return f"after op {self.cut} ({self.state}): {self.problem}"


@dataclasses.dataclass
class Exploration:
    ops: list[Op]
    acks: int = 0
    cuts: int = 0
    states: int = 0
    findings: list[Finding] = dataclasses.field(default_factory=list)

    def lost(self) -> list[Finding]:
        return [finding for finding in self.findings if finding.problem.startswith("lost:")]


Checker = Callable[[Path, list[dict[str, Any]]], list[str]]


def _workload(module: str, name: str, directory: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", module, name, str(directory), *extra]


def explore(
    module: str,
    name: str,
    scratch: Path,
    checker: Checker,
    *,
    setup: bool = False,
    plant: str | None = None,
    seed: int = 0,
    max_cuts: int | None = 40,
    samples: int = 1,
    timeout: float = 120.0,
) -> Exploration:
    """Trace workload `name` of `module` (run as `python -m module name DIR`) and check its crash states."""
    work = scratch / "work"
    work.mkdir(parents=True)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    env.pop("AGENTFS_CRASHSIM_PLANT", None)
    if setup:
        subprocess.run(_workload(module, name, work, "--setup"), env=env, check=True, timeout=timeout)
    os.sync()  # what the setup left is durable: the model starts from it
    model = States(work)
    if plant is not None:
        env["AGENTFS_CRASHSIM_PLANT"] = plant
    ops = record(_workload(module, name, work), work, scratch / "trace.txt", env, timeout)
    result = Exploration(ops)
    cuts = [index for index, op in enumerate(ops) if op.kind in CUT_KINDS]
    chosen = set(cuts)
    if max_cuts is not None and len(cuts) > max_cuts:
        acks = {index for index in cuts if ops[index].kind == "ack"}
        syncs = sorted(set(cuts) - acks)
        chosen = acks | set(random.Random(seed).sample(syncs, max(0, min(len(syncs), max_cuts - len(acks)))))
    acked: list[dict[str, Any]] = []
    for index, op in enumerate(ops):
        model.apply(op)
        if op.ack is not None:
            acked.append(op.ack)
            result.acks += 1
        if index not in chosen:
            continue
        result.cuts += 1
        rng = random.Random(f"{seed}/{index}")
        states = [("durable", model.durable())] + [(f"sample {n}", model.sample(rng)) for n in range(samples)]
        for label, tree in states:
            _check(result, checker, scratch, index, label, tree, acked)
    _check(result, checker, scratch, len(ops) - 1, "process crash", model.current(), acked)
    return result


def _check(result: Exploration, checker: Checker, scratch: Path, cut: int, label: str, tree: Tree, acked: list[dict[str, Any]]) -> None:
    state_dir = scratch / "state"
    materialize(tree, state_dir)
    try:
        result.findings.extend(Finding(cut, label, problem) for problem in checker(state_dir / STORE, list(acked)))
    finally:
        shutil.rmtree(state_dir)
    result.states += 1
