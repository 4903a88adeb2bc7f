"""Remote gc on a format-2 remote while another process pushes (the daemon, its own process): repacks lose nothing."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import agentfs
from agentfs.format.config import new_config, remote_config
from agentfs.sync.pack_remote import PackRemote
from agentfs.sync.pull import pull
from agentfs.sync.remote_gc import remote_gc
from agentfs.sync.remote_verify import verify_remote
from tests.servers import MotoServer, make_s3_spec

HELPERS = Path(__file__).parents[1] / "helpers"
SETTLE = 3.0


def test_remote_gc_repacks_while_the_daemon_pushes_and_loses_nothing(tmp_path: Path, moto_server: MotoServer) -> None:
    spec = make_s3_spec(moto_server)
    PackRemote(spec.url, spec.storage_options).ensure_config(remote_config(new_config()))  # a format-2 remote
    root = tmp_path / ".agentfs"
    agentfs.open(root).close()
    env = {**os.environ, "AGENTFS_STORE": str(root)}
    daemon = subprocess.Popen(
        [sys.executable, "-m", "agentfs.cli.main", "sync", spec.url, "--watch", "--interval", "1",
         "--storage-options", json.dumps(spec.storage_options)],
        env=env, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    writer = subprocess.Popen(
        [sys.executable, str(HELPERS / "pruning_writer.py"), str(root), "agent", "200", "0.04"], stdout=subprocess.PIPE, text=True
    )
    remote = PackRemote(spec.url, spec.storage_options)
    rounds = repacked = 0
    try:
        # rounds go on past the writer's end until one repacks (a bound of 40): under load the daemon still pushes
        # the writer's last commits and retirements then, and a gc that runs meanwhile is the race this checks
        # (it once ended after 3 rounds with nothing repacked, the daemon 17 checkpoints behind)
        while writer.poll() is None or rounds < 3 or (repacked == 0 and rounds < 40):
            report = remote_gc(remote, grace=0, settle=SETTLE)
            rounds += 1
            repacked += len(report.packs_deleted)
            time.sleep(1.0)  # pushes wait while a gc runs: leave them room, as a real schedule would
        assert writer.wait(timeout=120) == 0
    finally:
        writer.kill()
        daemon.send_signal(signal.SIGTERM)
        _out, err = daemon.communicate(timeout=60)
    assert daemon.returncode == 0, err
    assert rounds >= 3 and repacked > 0, f"{rounds} gc rounds repacked {repacked} packs: the race was not exercised\n{err}"
    remote_gc(remote, grace=0, settle=SETTLE)
    check = verify_remote(PackRemote(spec.url, spec.storage_options), deep=True)
    assert check.ok, str(check)
    with agentfs.open(tmp_path / "fresh") as fresh:
        pull(fresh.engine, PackRemote(spec.url, spec.storage_options))
        run = fresh.run("agent")
        assert run.latest().state["step"] == 199  # type: ignore[union-attr]
        for cp in run.history():
            assert cp.state["blob"] == random.Random(cp.state["step"] % 6).randbytes(40_000)
        assert fresh.verify().ok
