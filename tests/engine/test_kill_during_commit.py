"""Crash safety: kill -9 a committing writer at random moments, again and again.

After every kill: verify() is clean, latest() loads, every commit the writer reported as returned is
there with exactly the state it wrote, and the run is still one unbroken chain (steps 0..n, each
entry's parent the one before), so not even an unreported commit was torn or lost. The writer
(tests/helpers/writer.py) resumes from latest() each time it is restarted. A last test kills
agents during their very first agentfs.open(), while the store directory is being created.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import agentfs
from tests.helpers import raw, workload

HELPERS = Path(__file__).parents[1] / "helpers"
RUN = "crash/loop"
PRESTARTED = 2


def _start_writer(root: Path, durability: str) -> subprocess.Popen[str]:
    """A writer that has imported agentfs and waits for "go" before it opens the store."""
    cmd = [sys.executable, str(HELPERS / "writer.py"), str(root), RUN, "--durability", durability, "--resume", "--go"]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stdin=subprocess.PIPE, text=True)


def _kill_at_random(proc: subprocess.Popen[str], rng: random.Random) -> dict[str, int]:
    """Let the writer commit for 20-150 ms after it opened the store, SIGKILL it, return what it reported."""
    assert proc.stdin is not None and proc.stdout is not None
    ready = proc.stdout.readline()
    assert ready == "ready\n", f"writer failed to start: {ready!r}"
    proc.stdin.write("go\n")
    proc.stdin.flush()
    started = proc.stdout.readline()
    assert started == "started\n", f"writer failed to open the store: {started!r}"
    time.sleep(rng.uniform(0.020, 0.150))
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL, f"writer exited by itself with {proc.returncode}"
    reported: dict[str, int] = {}
    for line in proc.stdout.read().splitlines(keepends=True):
        if line.endswith("\n"):  # a line cut short by the kill was never reported
            checkpoint_id, step = line.split()
            reported[checkpoint_id] = int(step)
    proc.stdin.close()
    proc.stdout.close()
    return reported


def _check_checkpoint(cp: agentfs.Checkpoint, step: int) -> None:
    assert cp.metadata == workload.make_metadata(step)
    assert cp.state == workload.make_state(step), f"{cp} does not hold the state of step {step}"
    expected = workload.make_artifacts(step)
    assert sorted(cp.artifacts) == sorted(expected)
    for name, data in expected.items():
        assert cp.artifacts[name].read_bytes() == data


def _check_store(root: Path, reported: dict[str, int], fresh: dict[str, int]) -> None:
    with agentfs.open(root) as store:
        report = store.verify()
        assert report.ok, f"verify after kill -9:\n{report}"
        run = store.run(RUN)
        ids = run.ids()
        log_files = raw.record_ids(store, RUN)
        assert log_files == ids, "the log directory holds something that is not a checkpoint entry"
        assert report.entries == len(ids)
        missing = sorted(set(reported) - set(ids))
        assert not missing, f"commits reported as returned are gone after kill -9: {missing}"
        # one unbroken chain: steps 0..n-1 in id order, each parent the entry before
        previous: str | None = None
        for expected_step, checkpoint_id in enumerate(ids):
            cp = run.get(checkpoint_id)
            assert cp.parent == previous, f"{checkpoint_id}: parent {cp.parent}, expected {previous}"
            assert cp.metadata["step"] == expected_step
            if checkpoint_id in reported:
                assert reported[checkpoint_id] == expected_step
            previous = checkpoint_id
        latest = run.latest()
        if ids:
            assert latest is not None and latest.id == ids[-1]
            _check_checkpoint(latest, latest.metadata["step"])
        else:
            assert latest is None
        for checkpoint_id, step in fresh.items():  # every checkpoint reported since the last kill, byte for byte
            _check_checkpoint(run.get(checkpoint_id), step)


def _kill_loop(root: Path, durability: str, kills: int, seed: int) -> dict[str, int]:
    rng = random.Random(seed)
    reported: dict[str, int] = {}
    # the next writers start Python while this one lives and is checked; they touch nothing before "go"
    waiting = [_start_writer(root, durability) for _ in range(min(PRESTARTED, kills))]
    try:
        for kill in range(kills):
            writer = waiting.pop(0)
            if kill + len(waiting) + 1 < kills:
                waiting.append(_start_writer(root, durability))
            fresh = _kill_at_random(writer, rng)
            reported.update(fresh)
            _check_store(root, reported, fresh)
    finally:
        for writer in waiting:
            writer.kill()
            writer.wait()
            for stream in (writer.stdin, writer.stdout):
                if stream is not None:
                    stream.close()
    return reported


def _check_everything(root: Path, reported: dict[str, int]) -> None:
    with agentfs.open(root) as store:
        run = store.run(RUN)
        for checkpoint_id, step in reported.items():
            _check_checkpoint(run.get(checkpoint_id), step)
        # what the kills left behind is garbage gc may take; nothing reachable goes with it
        store.gc(grace=0)
        report = store.verify()
        assert report.ok, str(report)
        assert raw.temp_files(store) == [], "gc(grace=0) left temp files"
        for checkpoint_id, step in reported.items():
            _check_checkpoint(run.get(checkpoint_id), step)


def test_kill9_during_commits_default_durability(tmp_path: Path) -> None:
    root = tmp_path / ".agentfs"
    reported = _kill_loop(root, "power", kills=50, seed=1)
    print(f"{len(reported)} commits reported")
    assert len(reported) >= 25, "most kills landed before the first commit: the loop tested little"
    _check_everything(root, reported)


def test_kill9_during_commits_process_durability(tmp_path: Path) -> None:
    root = tmp_path / ".agentfs"
    reported = _kill_loop(root, "process", kills=25, seed=2)
    print(f"{len(reported)} commits reported")
    assert len(reported) >= 12, "most kills landed before the first commit: the loop tested little"
    _check_everything(root, reported)


def test_kill9_while_creating_a_new_store(tmp_path: Path) -> None:
    """An agent killed during its very first agentfs.open() must be able to open the store when restarted."""
    rng = random.Random(3)
    roots = [tmp_path / f"s{n}" / ".agentfs" for n in range(10)]
    writers = [_start_writer(root, "power") for root in roots]
    try:
        for root, writer in zip(roots, writers, strict=True):
            assert writer.stdin is not None and writer.stdout is not None
            assert writer.stdout.readline() == "ready\n"
            writer.stdin.write("go\n")
            writer.stdin.flush()
            time.sleep(rng.uniform(0, 0.025))  # creating a store takes about 20 ms (fsyncs)
            os.kill(writer.pid, signal.SIGKILL)
            writer.wait(timeout=30)
            left = sorted(p.name for p in root.iterdir()) if root.exists() else []
            try:
                store = agentfs.open(root)
            except agentfs.AgentFSError as exc:
                raise AssertionError(f"a store killed while being created cannot be opened again (it holds {left}): {exc}") from exc
            with store:
                cp = store.run(RUN).commit({"step": 0})
                assert store.run(RUN).ids()[-1] == cp.id  # the writer may have committed before the kill
                report = store.verify()
                assert report.ok, str(report)
    finally:
        for writer in writers:
            if writer.poll() is None:
                writer.kill()
                writer.wait()
            for stream in (writer.stdin, writer.stdout):
                if stream is not None:
                    stream.close()
