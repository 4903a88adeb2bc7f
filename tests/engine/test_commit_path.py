"""The commit path at speed: one look at other writers' records per commit, taken under the
run's stripe lock, and a commit that chose what to reuse from a stale index starts over instead of
naming what another process retired or compacted away meanwhile.

Real stores, real processes (strace counts the syscalls of a child process).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import agentfs

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
pytestmark = pytest.mark.timeout(120)


def test_a_commit_does_not_borrow_from_an_entry_another_process_retired_and_compacted_meanwhile(tmp_path: Path) -> None:
    root = tmp_path / ".agentfs"
    shared = os.urandom(5000)  # small enough to be packed into the entry, so that a later entry borrows it
    with agentfs.open(root, durability="process") as mine, agentfs.open(root, durability="process") as other:
        first = mine.run("r").commit({"shared": shared, "i": 0})  # this process's head hint from now on
        for step in (1, 2):
            newest = other.run("r").commit({"shared": os.urandom(5000), "i": step})
        other.run("r").prune(keep_last=1)
        other.gc(grace=0)
        assert first.id not in other.run("r").ids(), "the workload should retire the hinted head"
        # `mine` still indexes `first` as its last append: unchanged "shared" would be borrowed from it
        made = mine.run("r").commit({"shared": shared, "i": 3})
    assert made.parent == newest.id
    with agentfs.open(root) as fresh:
        assert fresh.run("r").latest().state == {"shared": shared, "i": 3}
        assert fresh.verify().ok


def _traced_commits(tmp_path: Path, syscalls: str, commits: int) -> str:
    """The strace lines (`syscalls`, descriptors named) of `commits` commits by a process, the store's only writer."""
    root = tmp_path / ".agentfs"
    code = (
        "import agentfs\n"
        f"store = agentfs.open({str(root)!r}, durability='process')\n"
        "run = store.run('r')\n"
        "run.commit({'i': -1})\n"
        "print('START', flush=True)\n"
        f"for i in range({commits}): run.commit({{'i': i, 'messages': ['m'] * i}})\n"
        "print('END', flush=True)\n"
        "store.close()\n"
    )
    trace_file = tmp_path / "strace.txt"
    command = ["strace", "-f", "-yy", "-o", str(trace_file), "-e", f"trace={syscalls},write", sys.executable, "-c", code]
    subprocess.run(command, env=ENV, check=True, timeout=60, capture_output=True)
    trace = trace_file.read_text()
    return trace[trace.index("START") : trace.index("END")]


@pytest.mark.usefixtures("strace_installed")
def test_one_listing_of_the_segments_per_commit(tmp_path: Path) -> None:
    commits = 40
    root = tmp_path / ".agentfs"
    during = _traced_commits(tmp_path, "openat", commits)
    segments = re.escape(str(root / "segments"))
    listings = re.findall(rf"openat\([^)]*\"{segments}\", O_RDONLY\|O_NONBLOCK\|O_CLOEXEC\|O_DIRECTORY", during)
    assert commits <= len(listings) <= commits + 2, f"{len(listings)} listings of segments/ for {commits} commits"
    locks = re.escape(str(root / "locks"))
    assert not re.findall(rf"openat\([^)]*\"{locks}/", during), "a commit opened a lock file: its descriptor is kept open"


def test_a_commit_with_parent_sees_what_other_writers_appended_to_segments_new_to_it_and_known_to_it(tmp_path: Path) -> None:
    root = tmp_path / ".agentfs"
    with agentfs.open(root, durability="process") as mine:
        first = mine.run("r").commit({"i": 0})  # this writer's segment, listed and skipped by its own refreshes
        with agentfs.open(root, durability="process") as other:  # another writer slot: a segment `mine` never listed
            theirs = other.run("r").commit({"i": 1}, parent=first.id)
            with pytest.raises(agentfs.Conflict, match=theirs.id):
                mine.run("r").commit({"i": 2}, parent=first.id)
            again = other.run("r").commit({"i": 3}, parent=theirs.id)  # a segment `mine` knows: its tail is read
            with pytest.raises(agentfs.Conflict, match=again.id):
                mine.run("r").commit({"i": 4}, parent=theirs.id)
        made = mine.run("r").commit({"i": 5}, parent=again.id)
        assert mine.run("r").commit({"i": 6}, parent=made.id).parent == made.id
        assert [cp.state["i"] for cp in mine.run("r").history()] == [6, 5, 3, 1, 0]


@pytest.mark.usefixtures("strace_installed")
def test_a_commit_reads_nothing_back_from_its_own_segment(tmp_path: Path) -> None:
    commits = 40
    during = _traced_commits(tmp_path, "pread64,pwrite64", commits)
    segment = re.escape(str(tmp_path / ".agentfs" / "segments")) + r"/[0-9a-f]{16}\.seg"
    assert len(re.findall(rf"pwrite64\(\d+<{segment}>", during)) == commits, "the workload should append once per commit"
    reads = re.findall(rf"pread64\(\d+<{segment}>", during)
    assert not reads, f"{len(reads)} reads of the segment for {commits} commits of its only writer"
