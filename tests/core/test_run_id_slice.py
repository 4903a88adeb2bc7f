"""Run.id_slice: a page of a run's ids and its checkpoint count, equal to ids()[start:stop] after commits and prunes
by this process and by another one (the index keeps each run's ids sorted once they were asked for)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

import agentfs

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
pytestmark = pytest.mark.timeout(60)

OTHER = """
import sys
import agentfs
with agentfs.open(sys.argv[1], durability="process") as store:
    run = store.run("r")
    if sys.argv[2] == "prune":
        run.prune(keep_last=int(sys.argv[3]))
    else:
        for step in range(int(sys.argv[3])):
            print(run.commit({"step": step, "by": "other"}).id)
"""


def other_process(root: Path, *args: str) -> list[str]:
    done = subprocess.run([sys.executable, "-c", OTHER, str(root), *args], env=ENV, capture_output=True, text=True, check=True)
    return done.stdout.split()


def matches_ids(run: agentfs.Run) -> int:
    ids = run.ids()
    for start, stop in [(None, None), (0, 1), (-3, None), (1, 4), (-100, -2), (len(ids) - 1, 50)]:
        assert run.id_slice(start, stop) == (len(ids), slice(start, stop).indices(len(ids))[0], ids[start:stop])
    return len(ids)


def test_id_slice_follows_commits_and_prunes_here_and_in_another_process(tmp_path: Path) -> None:
    with agentfs.open(tmp_path, durability="process") as store:
        run = store.run("r")
        mine = [run.commit({"step": step}).id for step in range(6)]
        assert run.id_slice(-2) == (6, 4, mine[-2:])
        assert matches_ids(run) == 6
        theirs = other_process(tmp_path, "commit", "3")
        assert run.id_slice(-3) == (9, 6, theirs)  # seen without asking for every id
        assert matches_ids(run) == 9
        run.prune(keep_last=4)
        assert run.id_slice() == (4, 0, [*mine[-1:], *theirs])
        assert matches_ids(run) == 4
        other_process(tmp_path, "prune", "2")
        assert run.id_slice() == (2, 0, theirs[-2:])
        assert matches_ids(run) == 2
        assert store.run("nothing").id_slice(-10) == (0, 0, [])
        assert asyncio.run(run.aid_slice(-1)) == run.id_slice(-1) == (2, 1, theirs[-1:])  # the async twin
