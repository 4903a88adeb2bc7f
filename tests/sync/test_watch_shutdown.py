"""Prompt shutdown of `agentfs sync --watch`, with a real process and a stopped moto server.

SIGINT exits 130 within 2 s even while the remote is down (a bounded wait for what is committed), a
second SIGINT stops at once, SIGTERM drains within its bounded wait.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import fsspec
import pytest

import agentfs
from tests.cli.test_cli import COMMAND, ENV
from tests.helpers import remote_raw
from tests.servers import MotoServer, RemoteSpec, make_s3_spec


@pytest.fixture
def downed_remote() -> Iterator[tuple[MotoServer, RemoteSpec]]:
    """A moto server of this test's own (the session one stays up for other tests), with one bucket."""
    server = MotoServer()
    try:
        yield server, make_s3_spec(server)
    finally:
        server.stop()


def watching(root: Path, spec: RemoteSpec, *extra: str) -> subprocess.Popen[str]:
    """`agentfs sync URL --watch` with default storage options (botocore's own retries), once it pushed the store."""
    command = [*COMMAND, "--store", str(root), "sync", spec.url, "--watch", "--storage-options", json.dumps(spec.storage_options), *extra]
    process = subprocess.Popen(command, stderr=subprocess.PIPE, text=True, env=ENV)
    assert process.stderr is not None and process.stderr.readline().startswith("agentfs: syncing")
    fs, remote_root = spec.connect(skip_instance_cache=True)
    deadline = time.monotonic() + 30
    while not remote_raw.has_head(fs, remote_root, "main", agentfs.open(root).run("main").latest().id):
        assert time.monotonic() < deadline, "the daemon never pushed"
        time.sleep(0.05)
    return process


def down_with_work_pending(server: MotoServer, root: Path) -> None:
    """Stop the remote, commit, and give the daemon time to be inside a failing push."""
    server.stop()
    with agentfs.open(root) as store:
        store.run("main").commit({"step": 2})
    time.sleep(1.5)


def stopped(process: subprocess.Popen[str], *signals: signal.Signals) -> tuple[int, float, str]:
    started = time.monotonic()
    for signum in signals:
        process.send_signal(signum)
        time.sleep(0.05)
    code = process.wait(timeout=60)
    took = time.monotonic() - started
    assert process.stderr is not None
    return code, took, process.stderr.read()


def committed(root: Path) -> None:
    with agentfs.open(root) as store:
        store.run("main").commit({"step": 1})


def test_sigint_exits_130_within_2_s_with_the_remote_down(downed_remote: tuple[MotoServer, RemoteSpec], tmp_path: Path) -> None:
    server, spec = downed_remote
    committed(tmp_path / "a")
    process = watching(tmp_path / "a", spec)
    down_with_work_pending(server, tmp_path / "a")
    code, took, stderr = stopped(process, signal.SIGINT)
    assert code == 130, stderr
    print(f"\nSIGINT -> exit with the remote down: {took:.2f} s")
    assert took < 2.0, f"SIGINT took {took:.2f} s"
    assert "1 not yet on the remote" in stderr and "Traceback" not in stderr


def test_a_second_sigint_stops_at_once(downed_remote: tuple[MotoServer, RemoteSpec], tmp_path: Path) -> None:
    server, spec = downed_remote
    committed(tmp_path / "a")
    process = watching(tmp_path / "a", spec, "--drain-timeout", "60")
    down_with_work_pending(server, tmp_path / "a")
    process.send_signal(signal.SIGTERM)  # a drain of up to 60 s...
    time.sleep(0.3)
    code, took, _stderr = stopped(process, signal.SIGINT)  # ...cut short by the next signal
    assert code == 130
    assert took < 0.7, f"the second signal took {took:.2f} s"


def test_sigterm_drains_within_its_bounded_wait(downed_remote: tuple[MotoServer, RemoteSpec], tmp_path: Path) -> None:
    server, spec = downed_remote
    committed(tmp_path / "a")
    process = watching(tmp_path / "a", spec, "--drain-timeout", "2")
    down_with_work_pending(server, tmp_path / "a")
    code, took, stderr = stopped(process, signal.SIGTERM)
    assert code == 4, stderr  # not drained: the remote stayed down
    assert 1.5 < took < 3.5, f"SIGTERM with --drain-timeout 2 took {took:.2f} s"
    assert "drain timed out after 2s" in stderr

    server.start()  # the remote is back: the commit SIGTERM could not drain is still pushed by the next sync
    fs = fsspec.filesystem("s3", skip_instance_cache=True, **spec.storage_options)
    process = watching(tmp_path / "a", spec)
    code, _took, stderr = stopped(process, signal.SIGTERM)
    assert code == 0, stderr
    assert len(remote_raw.entry_ids(fs, spec.url[5:], "main")) == 2
