"""`agentfs sync` (one shot), `pull`, `clone` and `status` through the real console script."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import agentfs
from tests.cli.test_cli import COMMAND, cli, json_of


def committed(root: Path) -> list[agentfs.Checkpoint]:
    with agentfs.open(root) as store:
        run = store.run("team/agent")
        for step in range(3):
            run.commit({"step": step, "big": os.urandom(40_000)}, artifacts={"out.bin": os.urandom(300_000)})
        return run.history()


def test_sync_then_clone_and_pull_reproduce_the_store(tmp_path: Path) -> None:
    source = tmp_path / "a" / ".agentfs"
    history = committed(source)
    url = (tmp_path / "remote").as_uri()
    pushed = cli("sync", url, store=source)
    assert pushed.returncode == 0, pushed.stderr
    assert "pushed 3 checkpoints" in pushed.stdout
    assert cli("sync", url, store=source).stdout.startswith("pushed 0 checkpoints")  # the index remembers

    clone = cli("clone", url, str(tmp_path / "b" / ".agentfs"))
    assert clone.returncode == 0, clone.stderr
    assert "3 checkpoints" in clone.stdout
    with agentfs.open(tmp_path / "b" / ".agentfs") as copy:
        assert [cp.id for cp in copy.run("team/agent").history()] == [cp.id for cp in history]
        assert copy.run("team/agent").latest().state == history[0].state
        assert copy.verify().ok

    other = tmp_path / "c" / ".agentfs"
    assert cli("init", store=other).returncode == 0
    pulled = cli("pull", url, "team/agent", store=other)
    assert pulled.returncode == 0, pulled.stderr
    cat = subprocess.run([*COMMAND, "--store", str(other), "cat", "team/agent", "out.bin"], capture_output=True, check=True)
    assert cat.stdout == history[0].artifacts["out.bin"].read_bytes()
    assert json_of(cli("verify", "--json", store=other))["ok"] is True
    assert json_of(cli("runs", "--json", store=other))["runs"][0]["checkpoints"] == 3


def test_status_reports_each_remote_and_its_lag(tmp_path: Path) -> None:
    source = tmp_path / "a" / ".agentfs"
    committed(source)
    url = (tmp_path / "remote").as_uri()
    assert cli("sync", url, store=source).returncode == 0
    with agentfs.open(source) as store:
        store.run("team/agent").commit({"step": 99})
    status = json_of(cli("status", "--json", store=source))
    (remote,) = status["remotes"]
    assert remote["remote"] == url
    assert remote["lag_checkpoints"] == 1 and remote["queue"] == 1
    assert remote["last_error"] is None
    text = cli("status", store=source).stdout
    assert url in text and "lag:        1 checkpoint," in text


def test_bad_storage_options_and_unreachable_remotes_fail_clearly(tmp_path: Path) -> None:
    source = tmp_path / "a" / ".agentfs"
    committed(source)
    bad_json = cli("sync", (tmp_path / "r").as_uri(), "--storage-options", "{not json", store=source)
    assert bad_json.returncode == 2 and "--storage-options is not valid JSON" in bad_json.stderr  # usage errors exit 2
    unknown = cli("pull", "nosuchprotocol://x/y", store=source)
    assert unknown.returncode == 2 and "nosuchprotocol://x/y" in unknown.stderr
    assert "Traceback" not in unknown.stderr
    assert json.loads(cli("verify", "--json", store=source).stdout)["ok"] is True  # nothing committed was touched
