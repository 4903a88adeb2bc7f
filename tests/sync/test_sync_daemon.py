"""The sync daemon against real servers and real processes.

* Outage: moto's S3 server stopped for a few seconds in the middle of 200+ commits. The daemon keeps
  running and reports the error, `commit` is not slowed down, and afterwards everything is on the
  remote and a store pulled from it verifies.
* Crash: a daemon process SIGKILLed in the middle of a large push; a restarted one uploads exactly
  what the persistent index did not yet confirm, and the remote verifies.
* The CLI daemon (`agentfs sync URL --watch`) as a real process: commits from another process reach
  the remote within seconds; SIGTERM drains a burst and exits 0; `agentfs status` then shows no lag.
* Events are only hints: with watching off, the periodic rescan alone pushes; commits in a run
  directory created after the daemon started are pushed too.

What the remote holds is read raw (tests/helpers/remote_raw.py: pack indexes and head keys), not
through the sync code under test.
"""

from __future__ import annotations

import gc
import json
import os
import queue
import random
import shutil
import signal
import statistics
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import pytest

import agentfs
from agentfs.format import kinds
from agentfs.format.walk import reach
from agentfs.sync.pack_remote import PackRemote
from agentfs.sync.pull import pull
from agentfs.sync.remote import remote_name
from tests.helpers import remote_raw
from tests.servers import MotoServer, RemoteSpec, make_file_spec, make_s3_spec

HELPERS = Path(__file__).parents[1] / "helpers"
AGENTFS = shutil.which("agentfs", path=str(Path(sys.executable).parent))
AGENTFS_COMMAND = [AGENTFS] if AGENTFS else [sys.executable, "-m", "agentfs.cli.main"]
OID_SIZE = 32


# helpers


class Lines:
    """Lines of a subprocess's pipe, read by a thread, so that a test can wait with a timeout."""

    def __init__(self, stream: IO[str]) -> None:
        self.queue: queue.Queue[str | None] = queue.Queue()
        self.seen: list[str] = []
        threading.Thread(target=self._pump, args=(stream,), daemon=True).start()

    def _pump(self, stream: IO[str]) -> None:
        for line in stream:
            self.queue.put(line)
        self.queue.put(None)

    def next(self, timeout: float) -> str:
        try:
            line = self.queue.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no line within {timeout}s; so far: {self.seen}") from None
        if line is None:
            self.queue.put(None)
            raise AssertionError(f"the process closed its output; so far: {self.seen}")
        self.seen.append(line)
        return line.rstrip("\n")

    def rest(self, timeout: float = 10.0) -> list[str]:
        """Every line up to end of file (the process has exited or is about to)."""
        out: list[str] = []
        deadline = time.monotonic() + timeout
        while True:
            line = self.queue.get(timeout=max(0.01, deadline - time.monotonic()))
            if line is None:
                self.queue.put(None)
                return out
            self.seen.append(line)
            out.append(line.rstrip("\n"))


@dataclass
class Proc:
    popen: subprocess.Popen[str]
    out: Lines
    err: Lines


def spawn(cmd: list[str], *, stdin: bool = False) -> Proc:
    popen = subprocess.Popen(
        cmd, stdin=subprocess.PIPE if stdin else subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert popen.stdout is not None and popen.stderr is not None
    return Proc(popen, Lines(popen.stdout), Lines(popen.stderr))


@pytest.fixture
def processes() -> Iterator[list[Proc]]:
    """Every process a test starts; any still running at the end is killed (by its own pid)."""
    started: list[Proc] = []
    yield started
    for proc in started:
        if proc.popen.poll() is None:
            proc.popen.kill()
            proc.popen.wait(timeout=10)


def wait_until(condition: Callable[[], bool], timeout: float, poll: float = 0.02) -> bool:
    deadline = time.monotonic() + timeout
    while True:
        if condition():
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(poll)


def remote_entry_ids(spec: RemoteSpec, run: str) -> set[str]:
    """The run's checkpoints some pack index on the remote names."""
    fs, root = spec.connect()
    return remote_raw.entry_ids(fs, root, run)


def entry_key_exists(spec: RemoteSpec, run: str, checkpoint_id: str) -> bool:
    """Whether the checkpoint reached the remote whole: a head key names it (written after its packs)."""
    fs, root = spec.connect()
    return remote_raw.has_head(fs, root, run, checkpoint_id)


def object_oid(line: str) -> bytes | None:
    """The oid an attempts line `object <hex>` names (tests/helpers/sync_daemon.py), else None (a key)."""
    kind, _, name = line.partition(" ")
    return bytes.fromhex(name) if kind == "object" else None


def needed_objects(store: agentfs.Store) -> set[bytes]:
    """Every object file (chunk or tree node) that some local checkpoint references."""
    needed: set[bytes] = set()
    for run, checkpoint_id in store.engine.local_entries():
        for _reached in reach(store.engine.read_entry(run, checkpoint_id).refs(), store.engine.db.read_nodes, needed):
            pass  # reach adds every object file it reaches to `needed`
    return needed


def read_index(path: Path) -> list[bytes]:
    data = path.read_bytes() if path.exists() else b""
    assert len(data) % OID_SIZE == 0, f"{path} holds a torn record: {len(data)} bytes"
    return [data[i : i + OID_SIZE] for i in range(0, len(data), OID_SIZE)]


def pulled_copy(tmp_path: Path, spec: RemoteSpec, name: str) -> agentfs.Store:
    """A fresh store ("another machine") holding everything on the remote; verified clean.

    It pulls with botocore's default timeouts and retries, not a fast-fail spec's (one attempt, 1 s to
    connect): that is for the daemon under test during an outage. The checking pull runs many ranged
    GETs at once against one moto server on a busy 2-core CI machine, where a connect can take over a
    second; with no retry one such connect failed the whole check (a CI run, ConnectTimeoutError)."""
    options = {key: value for key, value in spec.storage_options.items() if key != "config_kwargs"}
    fresh = agentfs.open(tmp_path / name)
    pull(fresh.engine, PackRemote(spec.url, options))
    report = fresh.verify()
    assert report.ok, f"a store pulled from the remote does not verify:\n{report}"
    return fresh


# an S3 outage during 200+ commits


OUTAGE_RUN = "outage/loop"
OUTAGE_SECONDS = 3.0
PHASE_COMMITS = 67  # at least this many commits before, during and after the outage: 200+ in all
COMMIT_PACE = 0.02  # seconds between commits: an agent that does a little work per step


def outage_state(i: int) -> tuple[dict[str, Any], dict[str, bytes]]:
    rng = random.Random(f"outage/{i}")
    # mostly packed into the log entry (< 16 KiB), every 10th chunked into loose objects
    state = {"step": i, "notes": rng.randbytes(20_000 if i % 10 == 0 else rng.randint(1_000, 12_000))}
    artifacts = {"out/blob.bin": rng.randbytes(100_000)} if i % 8 == 0 else {}
    return state, artifacts


def test_outage_daemon_survives_commit_keeps_speed_and_everything_arrives(tmp_path: Path, moto_server: MotoServer) -> None:
    """An S3 outage: the daemon keeps running, `commit` keeps its speed, everything arrives.

    The latency comparison is a regression guard, not a benchmark: commits during the outage must not
    be slower than before it (median during < 3 x median before + 5 ms). Before the outage the daemon
    is busy uploading on the same CPUs, so a commit path that never touches the remote is, if
    anything, faster during it; a commit that waited on the pusher, a lock it holds or a remote
    timeout (s3fs's fast-fail options make each failing call take milliseconds, botocore's default
    would be 6-12 s) would fail this.
    """
    spec = make_s3_spec(moto_server, fast_fail=True)
    store = agentfs.open(tmp_path / "store")
    assert store.engine.durability == "power"
    run = store.run(OUTAGE_RUN)
    # backoff capped at 2 s (default 30) so that the test does not sit out a long retry after the restart
    daemon = store.sync(spec.url, storage_options=spec.storage_options, interval=5.0, max_backoff=2.0)
    phase = "before"
    latencies: dict[str, list[float]] = {"before": [], "outage": [], "after": []}
    samples: list[tuple[str, bool, str | None, int]] = []  # phase, thread alive, last_error, lag
    sampling = threading.Event()

    def sample() -> None:
        while not sampling.is_set():
            status = daemon.status()
            thread = daemon._thread
            samples.append((phase, thread is not None and thread.is_alive(), status["last_error"], status["lag_checkpoints"]))
            time.sleep(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    ids: list[str] = []

    def commit() -> None:
        state, artifacts = outage_state(len(ids))
        started = time.perf_counter()
        cp = run.commit(state, artifacts=artifacts)
        latencies[phase].append(time.perf_counter() - started)
        ids.append(cp.id)
        time.sleep(COMMIT_PACE)

    try:
        try:
            for _ in range(PHASE_COMMITS):
                commit()
            moto_server.stop()
            phase = "outage"
            outage_started = time.monotonic()
            while time.monotonic() - outage_started < OUTAGE_SECONDS or len(latencies["outage"]) < PHASE_COMMITS:
                commit()
        finally:
            moto_server.start()
        phase = "after"
        for _ in range(PHASE_COMMITS):
            commit()

        assert len(ids) >= 200
        flushed = daemon.flush(timeout=60)
        cleared = wait_until(lambda: daemon.status()["last_error"] is None, timeout=5)
        sampling.set()
        sampler.join()
        status = daemon.status()
        alive = daemon._thread is not None and daemon._thread.is_alive()
    finally:
        sampling.set()
        drained = daemon.stop(timeout=10)
        store.close()

    before = statistics.median(latencies["before"])
    during = statistics.median(latencies["outage"])
    print(
        f"\ncommit latency median: before {before * 1e3:.1f} ms, outage {during * 1e3:.1f} ms, "
        f"after {statistics.median(latencies['after']) * 1e3:.1f} ms; commits {len(ids)}; "
        f"outage samples with an error {sum(1 for s in samples if s[0] == 'outage' and s[2])}"
        f"/{sum(1 for s in samples if s[0] == 'outage')}"
    )
    assert all(s[1] for s in samples), "the daemon thread died"
    assert alive, "the daemon thread died"
    outage_errors = [s[2] for s in samples if s[0] == "outage" and s[2]]
    assert outage_errors, "status() never reported last_error while the server was down"
    assert max(s[3] for s in samples if s[0] == "outage") > 0, "no lag reported during the outage"
    assert during < 3 * before + 0.005, (
        f"commit slowed down during the outage: median {during * 1e3:.1f} ms vs {before * 1e3:.1f} ms before"
    )
    assert flushed, f"flush(timeout=60) failed after the server came back: {status}"
    assert cleared, f"last_error still set after a successful push: {status}"
    assert status["lag_checkpoints"] == 0 and status["consecutive_errors"] == 0, status
    assert drained

    assert remote_entry_ids(spec, OUTAGE_RUN) == set(ids)
    with pulled_copy(tmp_path, spec, "other-machine") as other:
        other_run = other.run(OUTAGE_RUN)
        assert other_run.ids() == ids
        for i, checkpoint_id in enumerate(ids):
            cp = other_run.get(checkpoint_id)
            state, artifacts = outage_state(i)
            assert cp.state == state, f"checkpoint {i} came back with another state"
            assert {name: art.read_bytes() for name, art in cp.artifacts.items()} == artifacts


def test_drain_after_an_outage_does_not_sit_out_the_backoff(tmp_path: Path, moto_server: MotoServer) -> None:
    """SIGTERM / context exit "push what is committed (bounded wait)": once the remote is back, the drain
    must retry at once. After 4 failures the daemon backs off 2 s (0.25, 0.5, 1, 2, ... up to 30 s by
    default, the CLI's whole default drain timeout); a drain of 1 s that waits the backoff out pushes
    nothing although the remote is healthy for the whole drain.
    """
    spec = make_s3_spec(moto_server, fast_fail=True)
    with agentfs.open(tmp_path / "store") as store:
        daemon = store.sync(spec.url, storage_options=spec.storage_options)
        assert daemon.flush(timeout=30)
        try:
            moto_server.stop()
            cp = store.run("drain").commit({"step": 1})
            failing = wait_until(lambda: daemon.status()["consecutive_errors"] >= 4, timeout=10)
        finally:
            moto_server.start()
        assert failing, f"the daemon did not fail 4 times in a row: {daemon.status()}"
        started = time.monotonic()
        drained = daemon.stop(timeout=1.0)
        took = time.monotonic() - started
        assert drained, f"stop(timeout=1.0) did not push one small checkpoint to a healthy remote (took {took:.1f}s): {daemon.status()}"
        assert entry_key_exists(spec, "drain", cp.id)


# the daemon process SIGKILLed mid-push, then restarted


CRASH_RUN = "crash/backlog"
CRASH_ARTIFACT = 200_000  # distinct per checkpoint, two or three chunks
# moto serves ~30-60 requests/s here (CPU-bound, in this process), so S3 gets a smaller backlog
CRASH_CHECKPOINTS = {"file": 300, "s3": 40}
CRASH_BATCH = 10  # checkpoints a push confirms at a time: the kill lands between batches


def crash_artifact(i: int) -> bytes:
    return random.Random(f"crash/{i}").randbytes(CRASH_ARTIFACT)


def daemon_command(root: Path, spec: RemoteSpec, *extra: str) -> list[str]:
    return [
        sys.executable,
        str(HELPERS / "sync_daemon.py"),
        str(root),
        spec.url,
        "--storage-options",
        json.dumps(spec.storage_options),
        *extra,
    ]


def attempted_objects(path: Path) -> set[bytes]:
    keys = path.read_text().splitlines() if path.exists() else []
    return {oid for oid in map(object_oid, keys) if oid is not None}


def packed_objects(fs: Any, prefix: str) -> dict[bytes, dict[str, Any]]:
    """Every object a pack index on the remote names -> the fsspec info of the pack holding it."""
    found = {key: frame.pack for (kind, key), frame in remote_raw.frames(fs, prefix).items() if kind == kinds.OBJECT}
    infos = {pack: fs.info(pack) for pack in set(found.values())}
    return {oid: infos[pack] for oid, pack in found.items()}


def file_stamp(info: dict[str, Any]) -> tuple[Any, Any]:
    """What changes if a key is written again: LastModified and ETag on S3, mtime and inode on a disk."""
    if "LastModified" in info:
        return info["LastModified"], info.get("ETag")
    return info["mtime"], info.get("ino")


@pytest.fixture(params=["file", "s3"])
def crash_remote(request: pytest.FixtureRequest, tmp_path: Path) -> RemoteSpec:
    if request.param == "file":
        return make_file_spec(tmp_path)
    return make_s3_spec(request.getfixturevalue("moto_server"))


def test_daemon_killed_mid_push_restarts_without_reuploading_confirmed(
    tmp_path: Path, crash_remote: RemoteSpec, processes: list[Proc]
) -> None:
    """A daemon SIGKILLed mid-push: the restarted one uploads exactly what the index had not confirmed.

    Each daemon process logs every key it is about to create (tests/helpers/sync_daemon.py
    --attempts). The restarted one must attempt exactly the objects the index had not confirmed at the
    kill: none of the confirmed ones (not one create/PUT for them), and all the others. Objects in
    flight at the kill (in a pack that went up, not yet in the index) go up again in a new pack.
    The index confirms a batch at a time (--batch): the kill lands after some batches.
    """
    spec = crash_remote
    checkpoints = CRASH_CHECKPOINTS[spec.kind]
    root = tmp_path / "store"
    with agentfs.open(root, durability="process") as store:
        run = store.run(CRASH_RUN)
        ids = [run.commit({"step": i}, artifacts={"big.bin": crash_artifact(i)}).id for i in range(checkpoints)]
        needed = needed_objects(store)
    assert len(needed) >= 2 * checkpoints, "the artifacts should be several chunks each"
    index_file = root / "remotes" / remote_name(spec.url) / "objects"
    entries_file = index_file.with_name("entries")

    first = spawn(daemon_command(root, spec, "--attempts", str(tmp_path / "attempts-1"), "--batch", str(CRASH_BATCH)))
    processes.append(first)
    assert first.out.next(timeout=30).startswith("started")
    kill_at = len(needed) // 4 * OID_SIZE
    mid_push = wait_until(
        lambda: (index_file.exists() and index_file.stat().st_size >= kill_at) or first.popen.poll() is not None, 60, 0.001
    )
    os.kill(first.popen.pid, signal.SIGKILL)
    first.popen.wait(timeout=10)
    assert mid_push, "the first daemon confirmed too few objects within 60 s"
    assert first.popen.returncode == -signal.SIGKILL, f"the first daemon exited by itself: {first.err.rest()}"
    confirmed = set(read_index(index_file))
    attempted_before_kill = attempted_objects(tmp_path / "attempts-1")
    in_flight = attempted_before_kill - confirmed
    assert 0 < len(confirmed) < len(needed), "killed too late: the push was complete"
    assert confirmed <= needed and confirmed <= attempted_before_kill
    entries_at_kill = entries_file.read_text().splitlines() if entries_file.exists() else []

    # the index never claims what the remote lacks
    fs, prefix = spec.connect()
    on_remote = packed_objects(fs, prefix)
    assert confirmed <= set(on_remote), "the index confirms objects the remote does not hold"
    stamps = {oid: file_stamp(on_remote[oid]) for oid in confirmed}

    restart = ("--attempts", str(tmp_path / "attempts-2"), "--until-synced", "60", "--batch", str(CRASH_BATCH))
    second = spawn(daemon_command(root, spec, *restart))
    processes.append(second)
    assert second.out.next(timeout=30).startswith("started")
    assert second.popen.wait(timeout=90) == 0, f"the restarted daemon did not finish the push: {second.err.rest()}"
    status = json.loads(second.out.rest()[-1])
    reattempted = attempted_objects(tmp_path / "attempts-2")

    print(
        f"\n{spec.kind}: needed {len(needed)} objects; confirmed at kill {len(confirmed)}; in flight at kill {len(in_flight)}; "
        f"entries confirmed at kill {len(entries_at_kill)}; restarted daemon attempted {len(reattempted)}, "
        f"uploaded {status['uploaded_objects']}; confirmed objects attempted again: {len(reattempted & confirmed)}"
    )
    assert not reattempted & confirmed, f"{len(reattempted & confirmed)} objects confirmed before the kill were uploaded again"
    assert reattempted <= needed - confirmed
    # an unconfirmed object is skipped without a write only if it reached the remote before the kill
    assert needed - confirmed - reattempted <= in_flight
    assert len(needed - confirmed) - len(in_flight) <= status["uploaded_objects"] <= len(needed - confirmed)
    assert status["lag_checkpoints"] == 0 and status["pushed_entries"] == checkpoints - len(entries_at_kill)

    after_by_oid = {oid: file_stamp(info) for oid, info in packed_objects(fs, prefix).items()}
    assert {oid: after_by_oid[oid] for oid in confirmed} == stamps, "objects confirmed before the kill were rewritten"
    assert set(after_by_oid) == needed

    assert remote_entry_ids(spec, CRASH_RUN) == set(ids)
    with pulled_copy(tmp_path, spec, "other-machine") as other:
        other_run = other.run(CRASH_RUN)
        assert other_run.ids() == ids
        for i, checkpoint_id in enumerate(ids):
            assert other_run.get(checkpoint_id).artifacts["big.bin"].read_bytes() == crash_artifact(i)


# `agentfs sync URL --watch` as a real process


CLI_RUN = "cli/agent"
REACH_TIMEOUT = 5.0
BURST = 30


def writer_state(i: int) -> dict[str, Any]:
    rng = random.Random(f"sync-writer/{i}")
    return {"n": i, "blob": rng.randbytes(rng.randint(500, 30_000))}


def commit_from(writer: Proc, count: int) -> list[str]:
    assert writer.popen.stdin is not None
    writer.popen.stdin.write(f"commit {count}\n")
    writer.popen.stdin.flush()
    ids = [writer.out.next(timeout=30).split()[0] for _ in range(count)]
    assert writer.out.next(timeout=30) == "done"
    return ids


@pytest.fixture(params=["file", "s3"])
def cli_remote(request: pytest.FixtureRequest, tmp_path: Path) -> RemoteSpec:
    if request.param == "file":
        return RemoteSpec("file", make_file_spec(tmp_path).url, {})  # as a user types it: no options
    return make_s3_spec(request.getfixturevalue("moto_server"))


def test_cli_watch_daemon_pushes_another_process_commits_and_drains_on_sigterm(
    tmp_path: Path, cli_remote: RemoteSpec, processes: list[Proc]
) -> None:
    """`agentfs sync URL --watch`: another process's commits reach the remote; SIGTERM drains and exits 0."""
    spec = cli_remote
    root = tmp_path / "store"
    agentfs.open(root).close()
    cmd = [*AGENTFS_COMMAND, "--store", str(root), "sync", spec.url, "--watch"]
    if spec.storage_options:
        cmd += ["--storage-options", json.dumps(spec.storage_options)]
    daemon = spawn(cmd)
    processes.append(daemon)
    banner = daemon.err.next(timeout=30)
    assert banner.startswith("agentfs: syncing"), banner

    writer = spawn([sys.executable, str(HELPERS / "sync_writer.py"), str(root), CLI_RUN], stdin=True)
    processes.append(writer)
    assert writer.out.next(timeout=30) == "ready"

    ids: list[str] = []
    reach: list[float] = []
    for _ in range(5):
        (checkpoint_id,) = commit_from(writer, 1)
        returned = time.monotonic()
        arrived = wait_until(lambda cid=checkpoint_id: entry_key_exists(spec, CLI_RUN, cid), REACH_TIMEOUT, 0.01)
        reach.append(time.monotonic() - returned)
        assert arrived, f"commit {len(ids)} ({checkpoint_id}) not on the remote within {REACH_TIMEOUT}s"
        ids.append(checkpoint_id)
        time.sleep(0.2)

    ids += commit_from(writer, BURST)
    daemon.popen.send_signal(signal.SIGTERM)
    code = daemon.popen.wait(timeout=60)
    errors = "".join(daemon.err.seen) + "\n".join(daemon.err.rest())
    print(f"\ncommit -> on the remote ({spec.kind}): {', '.join(f'{s * 1e3:.0f} ms' for s in reach)}")
    assert code == 0, f"the daemon exited {code} after SIGTERM: {errors}"
    assert "Traceback" not in errors
    assert remote_entry_ids(spec, CLI_RUN) == set(ids), "the burst committed before SIGTERM was not drained"

    assert writer.popen.stdin is not None
    writer.popen.stdin.write("quit\n")
    writer.popen.stdin.close()
    assert writer.popen.wait(timeout=30) == 0

    result = subprocess.run(
        [*AGENTFS_COMMAND, "--store", str(root), "status", "--json"], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 0, result.stderr
    rows = [row for row in json.loads(result.stdout)["remotes"] if row["remote"] == spec.url]
    assert len(rows) == 1, result.stdout
    assert rows[0]["lag_checkpoints"] == 0 and rows[0]["queue"] == 0, rows[0]
    assert rows[0]["last_error"] is None and rows[0]["last_push"] is not None, rows[0]

    if spec.kind != "file":
        return  # the states were checked through file://; moto is slow to pull from (~40 ms a request)
    with pulled_copy(tmp_path, spec, "other-machine") as other:
        assert other.run(CLI_RUN).ids() == ids
        assert [other.run(CLI_RUN).get(cid).state for cid in ids] == [writer_state(i) for i in range(len(ids))]


# events are hints: scanning alone must be enough


def test_rescan_pushes_without_watchdog(tmp_path: Path) -> None:
    """watch=False: only the periodic rescan runs, and it alone pushes every commit, in old and new runs."""
    spec = make_file_spec(tmp_path)
    interval = 0.3
    with agentfs.open(tmp_path / "store") as store:
        store.run("early").commit({"i": 0})
        with store.sync(spec.url, storage_options=spec.storage_options, interval=interval, watch=False) as daemon:
            assert wait_until(lambda: remote_entry_ids(spec, "early") == set(store.engine.local_ids("early")), 10)
            for name in ("early", "later/nested/run"):
                for i in range(3):
                    cp = store.run(name).commit({"name": name, "i": i})
                    arrived = wait_until(lambda cp=cp, name=name: entry_key_exists(spec, name, cp.id), interval + 3)
                    assert arrived, f"{name}@{cp.id} not pushed within {interval + 3}s without events"
            assert daemon.flush(timeout=10)
            assert daemon.status()["lag_checkpoints"] == 0


def test_commits_in_runs_created_after_the_daemon_started(tmp_path: Path) -> None:
    """watchdog on: first commits of runs whose directories did not exist when the daemon started.

    The rescan interval is long (60 s), so only events (and what they wake) can push these in time:
    "pushes every commit within about a second" for the most common case of all, a new run.
    """
    spec = make_file_spec(tmp_path)
    with agentfs.open(tmp_path / "store") as store, store.sync(spec.url, storage_options=spec.storage_options, interval=60.0) as daemon:
        assert daemon.flush(timeout=10)
        late: list[str] = []
        for n in range(10):
            name = f"new/run-{n}/deep"
            cp = store.run(name).commit({"n": n, "blob": random.Random(n).randbytes(20_000)})
            started = time.monotonic()
            if not wait_until(lambda cp=cp, name=name: entry_key_exists(spec, name, cp.id), 3.0, 0.01):
                late.append(f"{name}@{cp.id}")
            print(f"{name}: {time.monotonic() - started:.3f}s")
        assert not late, f"first commits of new runs not pushed within 3 s (waiting for the 60 s rescan?): {late}"
        assert daemon.flush(timeout=10)


def test_daemon_scans_close_their_directory_iterators(tmp_path: Path) -> None:
    """Every push cycle and every status() rescans the run logs; an os.scandir iterator left open by
    a short-circuiting any() is a ResourceWarning each time (and an open fd until it is collected)."""
    spec = make_file_spec(tmp_path)
    with agentfs.open(tmp_path / "store") as store:
        for name in ("a", "b/c", "d"):
            store.run(name).commit({"name": name})
        gc.collect()  # garbage of earlier tests (their subprocess pipes) must not be counted here
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", ResourceWarning)
            with store.sync(spec.url, storage_options=spec.storage_options, interval=0.1, watch=False) as daemon:
                assert daemon.flush(timeout=10)
                for _ in range(5):
                    daemon.status()
            gc.collect()
    leaks = [str(w.message) for w in caught if issubclass(w.category, ResourceWarning)]
    assert not leaks, f"{len(leaks)} resources left open, e.g. {leaks[0]}"
