"""close() from any thread at any time: reads running in other threads finish or raise
StoreClosed, never a bare OSError/ValueError from a descriptor closed under them; a thread that holds a run or
journal lock and closes the store does not deadlock with another thread's commit waiting for that lock. Real
stores, real threads; every wait is bounded, so a hang fails the test instead of stalling the suite."""

from __future__ import annotations

import os
import random
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest

import agentfs
from agentfs.errors import StoreClosed

pytestmark = pytest.mark.timeout(120)
ROUNDS = int(os.environ.get("AGENTFS_CLOSE_ROUNDS", "12"))
JOIN = 20.0  # seconds a thread gets to finish after close(); a deadlock leaves it alive past this
ARTIFACT = 300_000  # incompressible bytes: several chunks per artifact, read from the segments each time


def made_store(root: Path) -> list[str]:
    with agentfs.open(root) as store:
        run = store.run("r")
        return [run.commit({"n": n}, artifacts={"a.bin": os.urandom(ARTIFACT)}).id for n in range(4)]


def reading(store: agentfs.Store, ids: list[str], stop: threading.Event, errors: list[BaseException]) -> None:
    """Read states, artifact bytes, ids and the head until stopped or refused with StoreClosed."""
    run = store.run("r")
    try:
        while not stop.is_set():
            run.ids()
            latest = run.latest()
            assert latest is not None and latest.id == ids[-1]
            for checkpoint_id in ids:
                checkpoint = store.run("r").get(checkpoint_id)
                assert checkpoint.state["n"] == ids.index(checkpoint_id)
                assert len(checkpoint.artifacts["a.bin"].read_bytes()) == ARTIFACT
    except StoreClosed:
        return
    except BaseException as exc:  # anything else is the bug: a closed descriptor surfacing as OSError/ValueError
        errors.append(exc)


def test_reads_in_other_threads_finish_or_raise_store_closed_while_close_runs(tmp_path: Path) -> None:
    root = tmp_path / ".agentfs"
    ids = made_store(root)
    chance = random.Random(18)
    for _round in range(ROUNDS):
        store = agentfs.open(root)
        stop, errors = threading.Event(), []
        readers = [threading.Thread(target=reading, args=(store, ids, stop, errors), daemon=True) for _ in range(3)]
        for reader in readers:
            reader.start()
        time.sleep(chance.uniform(0, 0.05))
        store.close()
        time.sleep(chance.uniform(0, 0.02))  # reads after close too: they reopen what they need, or are refused
        stop.set()
        for reader in readers:
            reader.join(timeout=JOIN)
            assert not reader.is_alive(), "a read hung after close()"
        assert not errors, [f"{type(error).__name__}: {error}" for error in errors]


def run_bounded(target: Callable[[], None], errors: list[BaseException]) -> threading.Thread:
    def guarded() -> None:
        try:
            target()
        except agentfs.AgentFSError:
            return
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=guarded, daemon=True)
    thread.start()
    return thread


def close_holding_a_lock(store: agentfs.Store, lock: str, call: str, pause: float, returned: list[str]) -> list[BaseException]:
    """In a thread holding the run's (or journal's) lock, close the store while another thread's commit (or journaled
    call that commits) waits for that lock; what either thread raised that is not an AgentFSError."""
    run = store.run("r")
    errors: list[BaseException] = []
    waiting = threading.Event()

    def commit() -> None:
        waiting.set()
        if lock == "run":
            returned.append(run.commit({"n": len(returned)}, artifacts={"a.bin": os.urandom(50_000)}).id)
        else:
            run.journal.once(call, lambda: returned.append(run.commit({"n": len(returned)}).id))

    def close() -> None:
        with store.engine.appending("r") if lock == "run" else store.engine.journal_lock("r"):
            committer = run_bounded(commit, errors)
            waiting.wait(JOIN)
            time.sleep(pause)  # the commit is on its way to the lock, or waiting for it
            store.close()
        committer.join(timeout=JOIN)
        assert not committer.is_alive(), "the commit waiting for the lock hung after close()"

    closer = run_bounded(close, errors)
    closer.join(timeout=2 * JOIN + 5)
    assert not closer.is_alive(), f"close() by a thread holding the {lock} lock deadlocked with a commit waiting for it"
    return errors


@pytest.mark.parametrize("lock", ["run", "journal"])
def test_close_by_a_thread_holding_a_lock_another_threads_commit_waits_for_does_not_deadlock(tmp_path: Path, lock: str) -> None:
    root = tmp_path / ".agentfs"
    chance = random.Random(lock)
    returned: list[str] = []
    for attempt in range(ROUNDS):
        store = agentfs.open(root)
        store.run("r").commit({"n": "first"})
        errors = close_holding_a_lock(store, lock, f"call-{attempt}", chance.uniform(0, 0.03), returned)
        assert not errors, [f"{type(error).__name__}: {error}" for error in errors]
    with agentfs.open(root) as reopened:  # every commit that returned is there
        assert set(returned) <= set(reopened.run("r").ids())
