"""Power loss at every sync and acknowledgement point (docs/DESIGN.md, invariant 1).

Each workload runs as real processes under strace; every state the strict POSIX model allows after
a cut is checked through the public API (tests/crashsim/README.md). Bounded by default (every
acknowledgement cut, a seeded sample of the sync cuts, one sampled state per cut);
AGENTFS_CRASH_STATES=full (`make crash-states`) checks every cut with four sampled states each.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from tests.crashsim import trace
from tests.crashsim.check import check
from tests.crashsim.explore import explore
from tests.crashsim.model import States
from tests.crashsim.workloads import SCENARIOS, SETUPS

FULL = os.environ.get("AGENTFS_CRASH_STATES") == "full"
WORKLOADS = "tests.crashsim.workloads"

pytestmark = [
    pytest.mark.usefixtures("strace_installed"),
    pytest.mark.timeout(900 if FULL else 120),
]


@pytest.mark.parametrize("name", SCENARIOS)
def test_every_crash_state_keeps_what_was_acknowledged(name: str, tmp_path: Path) -> None:
    result = explore(WORKLOADS, name, tmp_path, check, setup=name in SETUPS, max_cuts=None if FULL else 40, samples=4 if FULL else 1)
    assert result.acks >= 2, "the workload acknowledged too little to test anything"
    assert result.states > result.acks
    assert not result.findings, f"{len(result.findings)} problems in {result.states} states, first ones:\n" + "\n".join(
        map(str, result.findings[:10])
    )


@pytest.mark.parametrize(
    ("plant", "name"),
    [("segment-fdatasync", "commit"), ("segment-fdatasync", "once"), ("segment-dir-fsync", "commit"), ("reuse-sync", "reuse")],
)
def test_a_planted_missing_fsync_loses_an_acknowledged_call(plant: str, name: str, tmp_path: Path) -> None:
    result = explore(WORKLOADS, name, tmp_path, check, plant=plant, max_cuts=None if FULL else 40)
    assert result.lost(), f"planting {plant} went unnoticed in {result.states} states"


def test_the_model_keeps_only_what_was_synced(tmp_path: Path) -> None:
    """A file renamed into place after its fsync, but whose directory never was, is lost; synced bytes are kept."""
    root = tmp_path / "root"
    root.mkdir()
    script = f"""
import os
from tests.crashsim.trace import ack
root = {str(root)!r}
os.mkdir(root + "/d")
fd = os.open(root + "/synced", os.O_WRONLY | os.O_CREAT, 0o644)
os.write(fd, b"abc"); os.fsync(fd); os.write(fd, b"def"); os.close(fd)
d = os.open(root, os.O_RDONLY | os.O_DIRECTORY); os.fsync(d); os.close(d)
fd = os.open(root + "/d/tmp", os.O_WRONLY | os.O_CREAT, 0o644)
os.write(fd, b"xyz"); os.fsync(fd); os.close(fd)
os.rename(root + "/d/tmp", root + "/d/final")
ack({{"call": "rename"}})
"""
    model = States(root)  # empty: the snapshot before the workload
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    ops = trace.record([sys.executable, "-c", script], root, tmp_path / "trace.txt", env, timeout=60)
    assert [op.ack for op in ops if op.kind == "ack"] == [{"call": "rename"}]
    for op in ops:
        model.apply(op)
    assert model.durable() == {"d": None, "synced": b"abc"}  # d/ itself was synced in root, d/final never
    assert model.current() == {"d": None, "d/final": b"xyz", "synced": b"abcdef"}
