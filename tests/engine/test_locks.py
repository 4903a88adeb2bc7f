"""The store's lock descriptors, kept open across commits (engine/locks.py, LockFiles): they still exclude
this process's threads from each other, other processes, and a forked child from its parent.

Real threads, real processes (fork and spawn), real flock on the store's lock files.
"""

from __future__ import annotations

import fcntl
import multiprocessing
import os
import select
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import agentfs
from agentfs.engine.segment_writer import SLOTS, slot_lock_path

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}

pytestmark = pytest.mark.timeout(60)
HOLD = 0.002  # seconds each holder stays inside the lock: long enough for others to pile up at it


def test_threads_of_one_store_take_a_run_stripe_one_at_a_time(tmp_path: Path) -> None:
    inside, most = 0, 0
    count = threading.Lock()
    with agentfs.open(tmp_path / ".agentfs", durability="process") as store:

        def hold() -> None:
            nonlocal inside, most
            for _ in range(20):
                with store.engine.appending("r"):
                    with count:
                        inside += 1
                        most = max(most, inside)
                    time.sleep(HOLD)
                    with count:
                        inside -= 1

        threads = [threading.Thread(target=hold) for _ in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    assert most == 1


def test_a_thread_that_excludes_writers_waits_for_every_commit_of_the_others(tmp_path: Path) -> None:
    events: list[str] = []
    with agentfs.open(tmp_path / ".agentfs", durability="process") as store:
        writers_in = threading.Barrier(3)
        release = threading.Event()

        def write(name: str) -> None:
            with store.engine.writing():
                events.append(f"{name} in")
                writers_in.wait()
                release.wait(10)
                events.append(f"{name} out")

        def exclude() -> None:
            with store.engine.excluding_writers():
                events.append("gc in")

        writers = [threading.Thread(target=write, args=(name,)) for name in ("a", "b")]
        for thread in writers:
            thread.start()
        writers_in.wait()  # both hold it shared at once
        gc = threading.Thread(target=exclude)
        gc.start()
        time.sleep(0.2)
        assert "gc in" not in events, "an exclusive holder got in beside two shared ones"
        release.set()
        for thread in [*writers, gc]:
            thread.join()
    assert events[-1] == "gc in" and sorted(events[:2]) == ["a in", "b in"]


def _take_stripe(root: Path, go: multiprocessing.Queue[str], got: multiprocessing.Queue[str]) -> None:
    with agentfs.open(root, durability="process") as store:
        _take_inherited_stripe(store, go, got)


def _take_inherited_stripe(store: agentfs.Store, go: multiprocessing.Queue[str], got: multiprocessing.Queue[str]) -> None:
    go.get(timeout=30)
    with store.engine.appending("r"):
        got.put("got it")


@pytest.mark.parametrize("start", ["spawn", "fork"])
def test_another_process_waits_for_a_stripe_this_process_holds(start: str, tmp_path: Path) -> None:
    """spawn: another process opens the store; fork: a child uses the store object it inherited, whose
    descriptors share their open file descriptions (so their locks) with the parent's."""
    context = multiprocessing.get_context(start)
    go: multiprocessing.Queue[str] = context.Queue()
    got: multiprocessing.Queue[str] = context.Queue()
    with agentfs.open(tmp_path / ".agentfs", durability="process") as store:
        store.run("r").commit({"i": 0})  # the stripe's descriptor is open before the fork
        if start == "fork":
            child = context.Process(target=_take_inherited_stripe, args=(store, go, got))
        else:
            child = context.Process(target=_take_stripe, args=(tmp_path / ".agentfs", go, got))
        child.start()
        with store.engine.appending("r"):
            go.put("go")
            # blocked in flock, or (without the fix) through: either shows within the wait
            deadline = time.monotonic() + 30
            while got.empty() and not _blocked_in_flock(child.pid) and time.monotonic() < deadline:
                time.sleep(0.01)
            assert got.empty(), "the other process took a stripe this process holds"
        assert got.get(timeout=30) == "got it"
        child.join(30)
        assert child.exitcode == 0


def test_closing_the_store_closes_its_lock_descriptors(tmp_path: Path) -> None:
    root = tmp_path / ".agentfs"
    with agentfs.open(root, durability="process") as store:
        store.run("r").commit({"i": 0})
        assert len(_descriptors_into(root / "locks")) == 3  # the writer slot's, and kept open: the gc lock, the run's stripe
    assert _descriptors_into(root / "locks") == []


def _descriptors_into(directory: Path) -> list[str]:
    return [fd for fd in os.listdir("/proc/self/fd") if _points_into(fd, directory)]


def _points_into(fd: str, directory: Path) -> bool:
    try:
        return os.readlink(f"/proc/self/fd/{fd}").startswith(f"{directory}/")
    except FileNotFoundError:  # the descriptor listdir itself used
        return False


WRITER = """
import sys
import agentfs
with agentfs.open(sys.argv[1]) as store:
    print("ready", flush=True)
    for line in sys.stdin:
        store.run(line.strip()).commit({"by": sys.argv[2]})
        print("committed", flush=True)
"""


def _start_writer(root: Path, name: str) -> subprocess.Popen[str]:
    child = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(root), name], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=ENV
    )
    assert _line(child, 30) == "ready"
    return child


def _line(child: subprocess.Popen[str], timeout: float) -> str | None:
    """The child's next line of output, or None if it printed none within `timeout` seconds."""
    assert child.stdout is not None
    ready, _, _ = select.select([child.stdout], [], [], timeout)
    return child.stdout.readline().strip() if ready else None


def _blocked_in_flock(pid: int | None) -> bool:
    """Whether /proc/locks lists `pid` as waiting for a flock ("->" lines are blocked waiters)."""
    waiting = [line.split() for line in Path("/proc/locks").read_text().splitlines() if " -> FLOCK " in line]
    return any(fields[5] == str(pid) for fields in waiting)


def _wait_until_blocked_in_flock(pid: int) -> None:
    deadline = time.monotonic() + 30
    while not _blocked_in_flock(pid):
        assert time.monotonic() < deadline, f"process {pid} never waited for a lock"
        time.sleep(0.01)


def _tell(child: subprocess.Popen[str], run: str) -> None:
    assert child.stdin is not None
    child.stdin.write(run + "\n")
    child.stdin.flush()


def test_a_process_waiting_for_a_writer_slot_holds_no_lock_the_slot_holder_needs(tmp_path: Path) -> None:
    """All writer slots taken: a process waits for the one its pid picks. If it waited while holding its
    run's stripe, and that slot's holder then commits to the same run, neither could ever go on."""
    root = tmp_path / ".agentfs"
    agentfs.open(root).close()
    waiter = _start_writer(root, "waiter")  # no slot yet: a store takes one at its first write
    others: list[int] = []
    holder = None
    try:
        free = waiter.pid % SLOTS  # the slot the waiter will wait for (segment_writer._acquire_slot)
        for slot in range(SLOTS):  # live writers in every other slot
            if slot != free:
                fd = os.open(slot_lock_path(root / "locks", slot), os.O_RDWR | os.O_CREAT, 0o644)
                others.append(fd)
                fcntl.flock(fd, fcntl.LOCK_EX)
        holder = _start_writer(root, "holder")
        _tell(holder, "warm-up")  # takes the one free slot, the waiter's
        assert _line(holder, 30) == "committed"
        _tell(waiter, "r")
        _wait_until_blocked_in_flock(waiter.pid)  # on the holder's slot
        _tell(holder, "r")
        assert _line(holder, 15) == "committed", "deadlock: the waiter holds the run's lock while it waits for a slot"
        assert holder.stdin is not None
        holder.stdin.close()  # the holder closes its store and frees its slot: the waiter commits
        assert holder.wait(30) == 0
        assert _line(waiter, 30) == "committed"
    finally:
        for fd in others:
            os.close(fd)
        for child in filter(None, [waiter, holder]):
            child.kill()
            child.wait()
    with agentfs.open(root) as store:
        assert sorted(cp.state["by"] for cp in store.run("r").history()) == ["holder", "waiter"]
