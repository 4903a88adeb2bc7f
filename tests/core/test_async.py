"""The async twins: same results and errors as the blocking calls, the loop kept free.

Each test drives its own event loop with asyncio.run. Shown here: the twins agree with the sync
calls on one store; a ticker task keeps running on time while a large artifact is committed; at
most `store.engine.offload.workers` blocking calls run at once; aonce / atool_call write the same journal
as once / tool_call, and cancellation leaves a running call in flight but never runs one whose
start was still being recorded; awatch sees another process's commit, waits without a thread and
stops its observer when left; async_sync pushes to a file remote and to S3 (moto).
"""

from __future__ import annotations

import asyncio
import fcntl
import gc
import io
import os
import subprocess
import sys
import threading
import time
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

import pytest

import agentfs
from agentfs.format import keys
from tests.servers import MotoServer, RemoteSpec, make_file_spec, make_s3_spec

LARGE = 96 << 20  # bytes: an artifact whose commit takes several times the ticker's allowed gap
MAX_GAP = 0.1  # seconds the loop may go without running the ticker
TICK = 0.005


def run_async(coro: Awaitable[Any], timeout: float = 60.0) -> Any:
    async def bounded() -> Any:
        return await asyncio.wait_for(coro, timeout)

    return asyncio.run(bounded())


def offload_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("agentfs-async")]


def other_threads() -> set[threading.Thread]:
    """Threads that are not the offload pool's: watchdog observers, among others."""
    return set(threading.enumerate()) - set(offload_threads())


def wait_until_gone(threads: set[threading.Thread], timeout: float = 5.0) -> set[threading.Thread]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        gc.collect()
        left = {t for t in threads if t.is_alive()}
        if not left:
            return left
        time.sleep(0.05)
    return {t for t in threads if t.is_alive()}


class SlowReader:
    """An artifact source whose first read takes `pause` seconds, counting how many run at once."""

    active = 0
    peak = 0
    readers: set[str] = set()  # noqa: RUF012 - shared by every instance on purpose
    lock = threading.Lock()

    def __init__(self, data: bytes, pause: float) -> None:
        self.data = data
        self.pause = pause

    def read(self, size: int = -1) -> bytes:
        data, self.data = self.data, b""
        with SlowReader.lock:
            SlowReader.active += 1
            SlowReader.peak = max(SlowReader.peak, SlowReader.active)
            SlowReader.readers.add(threading.current_thread().name)
        time.sleep(self.pause)
        with SlowReader.lock:
            SlowReader.active -= 1
        return data


class PacedReader(io.RawIOBase):
    """`data` read at most `piece` bytes at a time, each read pausing `pause` seconds first (blocking, as a
    network stream does): a commit from it takes at least len(data) / piece * pause, however fast the machine."""

    def __init__(self, data: bytes, piece: int, pause: float) -> None:
        self.data, self.piece, self.pause, self.offset = memoryview(data), piece, pause, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        time.sleep(self.pause)
        size = min(len(buffer), self.piece, len(self.data) - self.offset)
        buffer[:size] = self.data[self.offset : self.offset + size]
        self.offset += size
        return size


# the twins agree with the blocking calls


def test_twins_return_what_the_sync_calls_return(store: agentfs.Store, tmp_path: Path) -> None:
    run = store.run("agent")
    source = tmp_path / "notes.txt"
    source.write_bytes(b"notes " * 1000)
    state = {"step": 1, "messages": ["hi"] * 50}

    async def main() -> None:
        cp = await run.acommit(state, artifacts={"report.md": b"# r", "notes.txt": source}, metadata={"by": "async"})
        second = await run.acommit({"step": 2}, parent=cp.id)
        assert (await run.alatest()).id == run.latest().id == second.id  # type: ignore[union-attr]
        assert (await run.aget(cp.id)).metadata == run.get(cp.id).metadata == {"by": "async"}
        assert [c.id for c in await run.ahistory(limit=1)] == [c.id for c in run.history(limit=1)] == [second.id]
        assert await run.aids() == run.ids() == [cp.id, second.id]
        assert await run.ahead_id() == second.id

        fresh = await run.aget(cp.id)  # a new Checkpoint: nothing decoded yet
        assert await fresh.astate() == state == run.get(cp.id).state
        assert await fresh.astored_state() == state
        assert await fresh.avalue("step") == 1
        notes = fresh.artifacts["notes.txt"]
        assert await notes.aread_bytes() == notes.read_bytes() == source.read_bytes()
        assert b"".join([chunk async for chunk in notes.aiter_bytes()]) == source.read_bytes()
        saved = await fresh.artifacts["report.md"].asave(tmp_path / "report.md")
        assert saved.read_bytes() == b"# r"

        with pytest.raises(agentfs.Conflict):
            await run.acommit({"step": 3}, parent=cp.id)  # the head moved: same error as commit
        with pytest.raises(agentfs.NotFound):
            await run.aget("01" + "0" * 24)
        with pytest.raises(agentfs.SerializationError, match=r'state\["bad"\]'):
            await run.acommit({"bad": object()})
        assert await run.aids() == [cp.id, second.id]  # nothing written by the failed commits

        forked = await run.afork(cp.id, "agent-b")
        assert (await forked.alatest()).state == state  # type: ignore[union-attr]
        assert await store.aruns() == store.runs() == ["agent", "agent-b"]

        pruned = await run.aprune(keep_last=1)
        assert pruned.removed == [] and await run.aids() == [cp.id, second.id]  # cp stays: agent-b was forked from it
        assert await store.aset_retention(keep_last=5) == store.set_retention(keep_last=5)
        report = await store.averify()
        assert report.problems == [] and report.entries == store.verify().entries
        assert (await store.agc(grace=0)).deleted == 0
        stats = await store.astats()
        assert {r.run for r in stats.runs} == {"agent", "agent-b"}
        deleted = await forked.adelete()
        assert deleted.removed and await store.aruns() == ["agent"]

    run_async(main())


# the loop stays free


def test_loop_keeps_serving_other_tasks_during_a_large_commit(store: agentfs.Store) -> None:
    data = os.urandom(LARGE)
    run = store.run("big")

    async def main() -> tuple[float, float, int]:
        gaps: list[float] = []
        done = asyncio.Event()

        async def ticker() -> None:
            last = time.perf_counter()
            while not done.is_set():
                await asyncio.sleep(TICK)
                now = time.perf_counter()
                gaps.append(now - last)  # a commit that blocked the loop shows here as one long gap
                last = now

        task = asyncio.create_task(ticker())
        await asyncio.sleep(4 * TICK)  # the ticker is running
        started = time.perf_counter()
        # 96 reads paced 5 ms apart: at least 0.48 s (a 96 MiB commit from memory took 0.19-0.27 s, too short to show a stall)
        cp = await run.acommit({"n": 1}, artifacts={"big.bin": PacedReader(data, 1 << 20, TICK)})
        took = time.perf_counter() - started
        done.set()
        await task
        assert cp.artifacts["big.bin"].size == LARGE
        return took, max(gaps), len(gaps)

    took, worst, ticks = run_async(main())
    print(f"commit of {LARGE >> 20} MiB: {took:.3f} s; the ticker's largest gap: {worst * 1000:.1f} ms over {ticks} ticks")
    # a blocked loop stalls for about the whole commit; a loaded machine (2 cores, other processes)
    # may delay a tick by itself, so the bound grows with the commit but stays far below it
    assert worst < max(MAX_GAP, took / 4), f"the loop stalled {worst * 1000:.0f} ms during a {took:.2f} s commit"
    assert took > 3 * MAX_GAP, f"the commit took only {took:.2f} s: too short to show anything"
    assert ticks > took / (4 * TICK)  # the ticker ran throughout, not once at the end
    assert run.latest().artifacts["big.bin"].read_bytes() == data  # type: ignore[union-attr]


def test_at_most_workers_blocking_calls_run_at_once(store: agentfs.Store) -> None:
    run = store.run("bounded")
    workers = store.engine.offload.workers
    SlowReader.active = SlowReader.peak = 0
    SlowReader.readers = set()
    before = threading.active_count()

    async def main() -> list[agentfs.Checkpoint]:
        commits = [run.acommit({"i": i}, artifacts={"a": SlowReader(b"x%d" % i, 0.1)}) for i in range(3 * workers)]
        return await asyncio.gather(*commits)

    started = time.perf_counter()
    done = run_async(main())
    took = time.perf_counter() - started
    assert len(done) == len(run.ids()) == 3 * workers
    assert SlowReader.peak == workers  # all the pool's threads were used, never more
    assert len(SlowReader.readers) == workers and all(name.startswith("agentfs-async") for name in SlowReader.readers)
    assert took >= 3 * 0.1  # three rounds of `workers` reads: they queued, none got a thread of its own
    assert threading.active_count() - before <= workers + 4  # the pool, and the store's own I/O pool (4)


# the journal: aonce and atool_call


def test_aonce_writes_the_same_journal_as_once(store: agentfs.Store) -> None:
    run = store.run("journal")
    calls: list[str] = []

    async def charge(order: str, amount: int) -> dict[str, Any]:
        calls.append(order)
        await asyncio.sleep(0)
        return {"order": order, "amount": amount}

    def charge_sync(order: str, amount: int) -> dict[str, Any]:
        calls.append(f"sync {order}")
        return {"order": order, "amount": amount}

    async def main() -> None:
        assert await run.aonce("charge:1", charge, "1", 10) == {"order": "1", "amount": 10}
        assert await run.aonce("charge:1", charge, "1", 10) == {"order": "1", "amount": 10}  # recorded, not called
        assert run.once("charge:1", charge_sync, "1", 10) == {"order": "1", "amount": 10}  # once sees aonce's call
        run.once("charge:2", charge_sync, "2", 20)
        assert await run.aonce("charge:2", charge, "2", 20) == {"order": "2", "amount": 20}  # and aonce sees once's
        call = await run.journal.aget("charge:1")
        assert call is not None and call.status == "ok" and call.args == {"args": ["1", 10], "kwargs": {}}
        assert [r.kind for r in await run.journal.arecords()] == ["start", "ok", "start", "ok"]

    run_async(main())
    assert calls == ["1", "sync 2"]


def test_aonce_records_a_failure_and_runs_it_again(store: agentfs.Store) -> None:
    run = store.run("journal")
    attempts: list[int] = []

    async def flaky() -> str:
        attempts.append(1)
        if len(attempts) == 1:
            raise ConnectionError("tool down")
        return "ok"

    async def main() -> None:
        with pytest.raises(ConnectionError, match="tool down"):
            await run.aonce("k", flaky)
        call = await run.journal.aget("k")
        assert call is not None and call.status == "error" and call.error == {"type": "builtins.ConnectionError", "message": "tool down"}
        assert await run.aonce("k", flaky) == "ok"
        assert (await run.journal.acalls())[0].attempts == 2

    run_async(main())
    assert len(attempts) == 2


def test_aonce_in_flight_elsewhere_raises_in_flight(store: agentfs.Store) -> None:
    run = store.run("journal")

    async def main() -> None:
        release = asyncio.Event()

        async def slow() -> str:
            await release.wait()
            return "done"

        first = asyncio.create_task(run.aonce("k", slow))
        while await run.journal.aget("k") is None:
            await asyncio.sleep(0.01)
        with pytest.raises(agentfs.InFlight, match="'k'"):
            await run.aonce("k", slow)
        release.set()
        assert await first == "done"

    run_async(main())


def test_cancelling_a_running_aonce_leaves_it_in_flight(store: agentfs.Store) -> None:
    run = store.run("journal")
    sent: list[str] = []

    async def send() -> str:
        sent.append("request")  # the side effect happened; its answer never arrives
        await asyncio.sleep(30)
        return "answer"

    async def again() -> str:
        return "again"

    async def main() -> None:
        task = asyncio.create_task(run.aonce("send", send))
        while not sent:
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert [c.key for c in await run.journal.ain_flight()] == ["send"]
        with pytest.raises(agentfs.InFlight):
            await run.aonce("send", again)  # may or may not have happened: not run again
        await run.journal.aabandon("send", "checked: never arrived")
        assert await run.aonce("send", again) == "again"

    run_async(main())
    assert sent == ["request"]


def test_keyboard_interrupt_in_aonce_leaves_it_in_flight(store: agentfs.Store) -> None:
    run = store.run("journal")

    async def interrupted() -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        asyncio.run(run.aonce("k", interrupted))
    assert [c.key for c in run.journal.in_flight()] == ["k"]


def test_aonce_cancelled_before_it_ran_is_never_called(store: agentfs.Store) -> None:
    """Cancelled while its start waits for the journal lock (held here, as another process would): the
    start is recorded once the lock is free, then ended as cancelled; the coroutine never runs."""
    run = store.run("journal")
    called: list[str] = []

    async def tool(label: str) -> str:
        called.append(label)
        return label

    async def main() -> None:
        run.journal.records()  # the lock file exists once the journal has been read
        with open(store.root.joinpath(*keys.stripe_lock_key("journal", run.name)), "a+b") as handle:
            fcntl.flock(handle, fcntl.LOCK_EX)
            task = asyncio.create_task(run.aonce("k", tool, "first"))
            await asyncio.sleep(0.3)  # the claim now runs, blocked on the lock
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            fcntl.flock(handle, fcntl.LOCK_UN)
        call = None
        for _ in range(100):  # the start and its end are written by the pool once the lock is free
            call = await run.journal.aget("k")
            if call is not None and call.status != "in_flight":
                break
            await asyncio.sleep(0.02)
        assert call is not None and call.status == "error" and call.error is not None
        assert call.error["type"] == "asyncio.CancelledError"
        assert await run.aonce("k", tool, "second") == "second"

    run_async(main())
    assert called == ["second"]


def test_atool_call_and_atool(store: agentfs.Store) -> None:
    run = store.run("journal")
    searches: list[str] = []

    @run.atool()
    async def search(q: str) -> list[str]:
        searches.append(q)
        return [q.upper()]

    async def main() -> None:
        async with run.atool_call("search", {"q": "a"}, key="search:a") as call:
            assert not call.done
            call.result = ["A"]
        async with run.atool_call("search", {"q": "a"}, key="search:a") as call:
            assert call.done and call.result == ["A"]
        with run.tool_call("search", {"q": "a"}, key="search:a") as sync_call:
            assert sync_call.done and sync_call.result == ["A"]
        with pytest.raises(ValueError, match="bad"):
            async with run.atool_call("search", {"q": "b"}, key="search:b"):
                raise ValueError("bad")
        assert (await run.journal.aget("search:b")).status == "error"  # type: ignore[union-attr]

        async def body() -> None:
            async with run.atool_call("search", {"q": "c"}, key="search:c"):
                await asyncio.sleep(30)

        task = asyncio.create_task(body())
        while await run.journal.aget("search:c") is None:
            await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert (await run.journal.aget("search:c")).status == "in_flight"  # type: ignore[union-attr]

        assert await search("x") == ["X"] and await search("x") == ["X"] and await search("y") == ["Y"]

    run_async(main())
    assert searches == ["x", "y"]


# awatch


def commit_elsewhere(root: Path, run: str, step: int) -> None:
    code = "import sys, agentfs; agentfs.open(sys.argv[1]).run(sys.argv[2]).commit({'step': int(sys.argv[3])})"
    subprocess.run([sys.executable, "-c", code, str(root), run, str(step)], check=True, timeout=60)


def test_awatch_sees_a_commit_from_another_process(store: agentfs.Store) -> None:
    store.run("agent").commit({"step": 0})  # before watching: not yielded

    async def main() -> list[Any]:
        seen = []
        async with store.awatch("agent", timeout=20) as changes:
            writer = asyncio.create_task(asyncio.to_thread(commit_elsewhere, store.root, "agent", 1))
            async for cp in changes:
                seen.append(await cp.astate())
                break
            await writer
        return seen

    assert run_async(main()) == [{"step": 1}]


def test_awatch_waits_without_a_thread_and_stops_when_left(store: agentfs.Store) -> None:
    run = store.run("agent")
    run.commit({"step": 0})
    baseline = other_threads()
    consumers = 3 * store.engine.offload.workers  # more than the pool: each holding a thread would starve alatest

    async def main() -> float:
        async def consume() -> None:
            async for _cp in store.awatch("quiet"):
                pass

        tasks = [asyncio.create_task(consume()) for _ in range(consumers)]
        await asyncio.sleep(1.0)  # every consumer has started and is waiting
        started = time.perf_counter()
        latest = await run.alatest()
        took = time.perf_counter() - started
        assert latest is not None and latest.state == {"step": 0}
        assert len(other_threads() - baseline) >= consumers  # one observer per consumer is running
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        async for _cp in store.awatch("quiet", timeout=0.2):  # a timeout ends it
            pass
        async with store.awatch() as changes:
            await run.acommit({"step": 1})
            async for cp in changes:
                assert cp.state == {"step": 1}
                break  # leaving the loop, then the block
        return took

    took = run_async(main())
    assert took < 0.5, f"alatest waited {took:.2f} s behind {consumers} waiting watchers"
    assert wait_until_gone(other_threads() - baseline) == set()  # cancelled, broken out of, timed out: all stopped


# async_sync


@pytest.fixture(params=["file", "s3"])
def remote_spec(request: pytest.FixtureRequest, tmp_path: Path) -> RemoteSpec:
    if request.param == "file":
        return make_file_spec(tmp_path)
    moto: MotoServer = request.getfixturevalue("moto_server")
    return make_s3_spec(moto)


def test_async_sync_pushes_and_another_store_resumes(store: agentfs.Store, remote_spec: RemoteSpec, tmp_path: Path) -> None:
    run = store.run("agent")

    async def main() -> tuple[bool, dict[str, Any]]:
        async with store.async_sync(remote_spec.url, remote_spec.storage_options, interval=60) as daemon:
            for step in range(3):
                await run.acommit({"step": step}, artifacts={"log.txt": b"line %d\n" % step * 100})
            await run.aonce("tool", asyncio.sleep, 0, "result")
            flushed = await daemon.aflush(timeout=30)
            status = await daemon.astatus()
        return flushed, status

    flushed, status = run_async(main())
    assert flushed and status["lag_checkpoints"] == 0 and status["last_error"] is None
    with agentfs.open(tmp_path / "machine-b", remote=remote_spec.url, storage_options=remote_spec.storage_options) as other:
        resumed = other.run("agent")
        latest = resumed.latest()
        assert latest is not None and latest.id == run.head_id() and latest.state == {"step": 2}
        assert latest.artifacts["log.txt"].read_bytes() == b"line 2\n" * 100
        assert resumed.journal.get("tool").result == "result"  # type: ignore[union-attr]


def test_aflush_times_out_while_the_remote_is_unreachable(store: agentfs.Store, tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_bytes(b"")  # a remote under a regular file cannot be created

    async def main() -> tuple[bool, float, dict[str, Any]]:
        async with store.async_sync((blocker / "remote").as_uri(), {"auto_mkdir": True}, max_backoff=0.2) as daemon:
            await store.run("agent").acommit({"step": 1})
            started = time.perf_counter()
            flushed = await daemon.aflush(timeout=1.2)
            took = time.perf_counter() - started
            status = await daemon.astatus()
            assert not await daemon.astop(timeout=0.2)  # nothing could be drained; leaving the block stops no more
        return flushed, took, status

    flushed, took, status = run_async(main())
    assert not flushed and 1.2 <= took < 3.0
    assert status["lag_checkpoints"] == 1 and status["last_error"]


def test_concurrent_aupdates_lose_no_increment_and_acommit_keeps_artifacts(store: agentfs.Store) -> None:
    run = store.run("counter")

    async def main() -> list[int]:
        await run.acommit({"n": 0}, artifacts={"notes.txt": b"kept"})
        # 4 offload threads contend on one head: each Conflict is retried with the new head
        await asyncio.gather(*(run.aupdate(lambda s: {"n": s["n"] + 1}, keep_artifacts=True) for _ in range(20)))
        await run.acommit({"n": -1}, keep_artifacts=True)
        return [cp.state["n"] for cp in await run.ahistory()]

    counts = asyncio.run(main())
    assert counts == [-1, *range(20, -1, -1)]
    assert run.latest().artifacts["notes.txt"].read_bytes() == b"kept"
