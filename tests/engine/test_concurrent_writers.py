"""Concurrency: several processes commit to one store, and to one run, at once.

Writers are real processes (tests/helpers/writer.py) released together; each reports the ids its
commits returned. Nothing may be lost, each run must stay one linear chain (the per-run lock makes
every append's parent the head it found), and verify() must be clean. Optimistic concurrency:
commit(parent=stale) raises agentfs.Conflict and leaves the log as it was.
"""

from __future__ import annotations

import itertools
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

import agentfs
from tests.helpers import raw, workload

HELPERS = Path(__file__).parents[1] / "helpers"
COMMITS = 30


def _run_together(root: Path, jobs: list[list[str]]) -> list[list[str]]:
    """Start one writer per job, release them all at once, return each one's output lines after "started"."""
    procs = [
        subprocess.Popen(
            [sys.executable, str(HELPERS / "writer.py"), str(root), *job, "--go"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for job in jobs
    ]
    try:
        for proc in procs:
            assert proc.stdout is not None
            assert proc.stdout.readline() == "ready\n"
        for proc in procs:
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        outputs = []
        for proc, job in zip(procs, jobs, strict=True):
            out, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, f"writer {job} failed:\n{err}"
            lines = out.splitlines()
            assert lines[0] == "started"
            outputs.append(lines[1:])
        return outputs
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def _check_chain(run: agentfs.Run) -> list[agentfs.Checkpoint]:
    """Every parent is in the run, and the run is one linear chain: in id order, each parent is the id before."""
    ids = run.ids()
    checkpoints = [run.get(i) for i in ids]
    for previous, cp in zip([None, *ids[:-1]], checkpoints, strict=True):
        assert cp.parent is None or cp.parent in ids, f"{cp}: parent {cp.parent} is not in the run"
        assert cp.parent == previous, f"{cp}: parent {cp.parent}, expected the previous head {previous}"
    return checkpoints


def test_processes_commit_to_one_run_and_to_separate_runs_at_once(tmp_path: Path) -> None:
    root = tmp_path / ".agentfs"
    agentfs.open(root).close()
    shared = "team/shared"
    solo = ["team/solo-a", "team/solo-b"]
    jobs = [[shared, "--tag", f"w{n}", "--count", str(COMMITS)] for n in range(4)]
    jobs += [[name, "--tag", name, "--count", str(COMMITS)] for name in solo]
    outputs = _run_together(root, jobs)

    reported: dict[str, dict[str, tuple[str, int]]] = {shared: {}, solo[0]: {}, solo[1]: {}}
    for job, lines in zip(jobs, outputs, strict=True):
        run_name, tag = job[0], job[2]
        assert len(lines) == COMMITS, f"writer {tag} reported {len(lines)} commits"
        ids = [line.split()[0] for line in lines]
        assert ids == sorted(ids), f"writer {tag}: later commits got smaller ids"
        for line in lines:
            checkpoint_id, step = line.split()
            assert checkpoint_id not in reported[run_name], f"id {checkpoint_id} returned twice"
            reported[run_name][checkpoint_id] = (tag, int(step))

    with agentfs.open(root) as store:
        assert store.runs() == sorted(reported)
        total = 0
        for run_name, expected in reported.items():
            run = store.run(run_name)
            log_files = raw.record_ids(store, run_name)
            assert log_files == run.ids()
            assert set(log_files) == set(expected), f"{run_name}: lost {set(expected) - set(log_files)}"
            total += len(log_files)
            for cp in _check_chain(run):
                tag, step = expected[cp.id]
                assert cp.metadata == workload.make_metadata(step, tag)
                assert cp.state == workload.make_state(step, tag)
                assert {n: a.read_bytes() for n, a in cp.artifacts.items()} == workload.make_artifacts(step, tag)
        assert total == COMMITS * len(jobs)
        assert len(reported[shared]) == 4 * COMMITS

        # the writers really ran at once: their appends to the shared run interleave
        tags = [reported[shared][i][0] for i in store.run(shared).ids()]
        switches = sum(a != b for a, b in itertools.pairwise(tags))
        assert switches > 3, f"the shared run's writers ran one after another: {Counter(tags)}"

        report = store.verify()
        assert report.ok, str(report)
        assert report.entries == total


def test_processes_open_a_new_store_at_once(tmp_path: Path) -> None:
    """Several agents started together on a fresh directory: each must get the same, working store."""
    root = tmp_path / "fresh" / ".agentfs"
    jobs = [[f"agent-{n}", "--count", "3"] for n in range(6)]
    outputs = _run_together(root, jobs)
    with agentfs.open(root) as store:
        assert store.runs() == sorted(job[0] for job in jobs)
        for job, lines in zip(jobs, outputs, strict=True):
            assert [line.split()[0] for line in lines] == store.run(job[0]).ids()
        report = store.verify()
        assert report.ok, str(report)


def _log(store: agentfs.Store, run: str) -> list[str]:
    return raw.record_ids(store, run)


def test_commit_with_a_stale_parent_conflicts_and_writes_no_entry(store: agentfs.Store) -> None:
    run = store.run("agent")
    first = run.commit({"step": 0})
    second = run.commit({"step": 1})
    assert second.parent == first.id
    before = _log(store, "agent")

    with pytest.raises(agentfs.Conflict) as caught:
        run.commit({"step": "stale"}, artifacts={"a.txt": b"x" * 50_000}, parent=first.id)
    assert isinstance(caught.value, RuntimeError)
    assert isinstance(caught.value, agentfs.AgentFSError)
    assert "agent" in str(caught.value) and second.id in str(caught.value)
    with pytest.raises(RuntimeError):
        run.commit({"step": "stale"}, parent=first.id)
    assert _log(store, "agent") == before
    latest = run.latest()
    assert latest is not None and latest.id == second.id and latest.state == {"step": 1}

    third = run.commit({"step": 2}, parent=second.id)  # the current head: accepted
    assert third.parent == second.id
    assert _log(store, "agent") == [*before, third.id]


def test_commit_with_no_parent_conflicts_on_a_non_empty_run(store: agentfs.Store) -> None:
    run = store.run("agent")
    first = run.commit({"step": 0}, parent=None)  # an empty run: None is its head
    assert first.parent is None
    before = _log(store, "agent")
    with pytest.raises(agentfs.Conflict):
        run.commit({"step": 1}, parent=None)
    assert _log(store, "agent") == before
    assert run.ids() == [first.id]


def test_racing_commits_on_the_same_parent_exactly_one_wins(tmp_path: Path) -> None:
    root = tmp_path / ".agentfs"
    with agentfs.open(root) as store:
        head = store.run("race").commit({"step": 0}).id
    racers = 5
    outputs = _run_together(root, [["race", "--tag", f"r{n}", "--parent", head] for n in range(racers)])
    results = [lines[0].split(" ", 1) for lines in outputs]
    winners = [rest for kind, rest in results if kind == "ok"]
    assert len(winners) == 1, f"expected exactly one commit on parent {head} to succeed: {results}"
    assert sorted(kind for kind, _ in results) == ["conflict"] * (racers - 1) + ["ok"]
    with agentfs.open(root) as store:
        run = store.run("race")
        assert run.ids() == [head, winners[0]]
        assert run.get(winners[0]).parent == head
        assert store.verify().ok


def test_a_writer_that_adopts_a_segment_reads_what_its_last_holder_appended_there(tmp_path: Path) -> None:
    """A store's writer takes the first free slot and continues that slot's unsealed segment, which another store
    (here another Store object: flock excludes by open file, as between processes) appended to after this one last
    read it. Planted: before the adopting writer read that tail, `b` appended over a stale head (a lost update),
    which is how tests/integrations/test_langgraph_store.py's several writers lost an item under load."""
    root = tmp_path / ".agentfs"
    agentfs.open(root).close()
    with agentfs.open(root) as b:
        with agentfs.open(root) as a:
            first = a.run("agent").commit({"n": 0})
            assert b.run("agent").head_id() == first.id  # b's index has read the segment up to here
            second = a.run("agent").commit({"n": 1})
            third = a.run("agent").commit({"n": 2})
        # a closed: its slot is free and its segment unsealed; b's first write adopts them
        with pytest.raises(agentfs.Conflict, match=third.id):
            b.run("agent").commit({"n": "stale"}, parent=first.id)
        fourth = b.run("agent").commit({"n": 3})
        assert fourth.parent == third.id
        assert [c.id for c in b.run("agent").history()] == [fourth.id, third.id, second.id, first.id]
    assert len(list((root / "segments").glob("*.seg"))) == 1  # b appended in a's segment: it adopted it


FORKED = """
import os, sys, agentfs
store = agentfs.open(sys.argv[1])
parent = store.run("parent")
parent.commit({"i": -1, "pad": "p" * 3000})  # this process's writer holds a slot and appends to its segment now
ready, go = os.pipe()
pid = os.fork()
if pid == 0:  # the child commits through the same Store object, then closes it (atexit-like), then exits
    try:
        parents_next = os.read(ready, 26).decode()  # committed by the parent after the fork
        assert (store.run("parent").head_id() or "") >= parents_next, "the child missed the parent's new head"
        child = store.run("child")
        for i in range(40):
            child.commit({"i": i, "pad": "c" * 3000})
        store.close()
    except BaseException as exc:
        print(f"child: {exc!r}", flush=True)
        os._exit(1)
    os._exit(0)
os.write(go, parent.commit({"i": 0, "pad": "p" * 3000}).id.encode())
for i in range(1, 40):
    parent.commit({"i": i, "pad": "p" * 3000})
_, status = os.waitpid(pid, 0)
for i in range(40, 50):  # after the child closed its copy of the store
    parent.commit({"i": i, "pad": "p" * 3000})
store.close()
sys.exit(os.waitstatus_to_exitcode(status))
"""


def test_a_child_forked_after_the_store_wrote_commits_through_a_writer_of_its_own(tmp_path: Path) -> None:
    """multiprocessing's fork start method hands a child the parent's open store: the child's writer must
    not be the parent's (same slot, same segment, same offsets), and its close must not cut the parent's segment."""
    root = tmp_path / "store"
    done = subprocess.run([sys.executable, "-c", FORKED, str(root)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    with agentfs.open(root) as store:
        report = store.verify()
        assert report.ok, str(report)
        assert [cp.state["i"] for cp in _check_chain(store.run("parent"))] == list(range(-1, 50))
        assert [cp.state["i"] for cp in _check_chain(store.run("child"))] == list(range(40))
