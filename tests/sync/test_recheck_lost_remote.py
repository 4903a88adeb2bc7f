"""The push index is a cache. A remote that lost everything (its config kept,
or gone too) is found out and filled again by `agentfs sync --recheck` and by the daemon's periodic
reconciliation; `status` shows the last one. moto's S3 server and a file remote, real processes."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

import agentfs
from tests.cli.test_cli import cli
from tests.servers import RemoteSpec


def _fill(home: Path) -> dict[str, object]:
    """Two runs with artifacts and a journal record; their states by id."""
    with agentfs.open(home) as store:
        made = {}
        for run_name in ("a", "b/c"):
            run = store.run(run_name)
            for step in range(3):
                made[f"{run_name}@{run.commit({'step': step}, artifacts={'out.bin': bytes([step]) * 70_000}).id}"] = {"step": step}
            run.once("tool", lambda: 42)
        return made


def _wipe(spec: RemoteSpec, *, keep_config: bool) -> None:
    fs, root = spec.connect()
    config = fs.cat_file(f"{root}/config")
    for key in fs.find(root):
        fs.rm_file(key)
    if keep_config:
        fs.pipe_file(f"{root}/config", config)
    fs.invalidate_cache()


def _assert_whole(spec: RemoteSpec, made: dict[str, object], fresh: Path) -> None:
    """A fresh store pulls every checkpoint with its exact state and artifacts, and the remote verifies deep."""
    options = json.dumps(spec.storage_options)
    pulled = cli("pull", spec.url, "--storage-options", options, store=fresh)
    assert pulled.returncode == 0, pulled.stderr
    with agentfs.open(fresh) as store:
        found = {f"{run}@{cid}": store.run(run).get(cid).state for run in store.runs() for cid in store.run(run).ids()}
        assert found == made
        assert store.run("a").latest().artifacts["out.bin"].read_bytes() == bytes([2]) * 70_000
        assert store.run("a").journal.records()
    deep = cli("verify", "--remote", spec.url, "--deep", "--storage-options", options)
    assert deep.returncode == 0, deep.stdout + deep.stderr


@pytest.mark.parametrize("keep_config", [True, False], ids=["config-kept", "config-gone"])
@pytest.mark.parametrize("remote", ["s3", "file"], indirect=True)
def test_recheck_and_the_daemon_push_again_what_an_emptied_remote_lost(remote: RemoteSpec, keep_config: bool, tmp_path: Path) -> None:
    home = tmp_path / "home"
    made = _fill(home)
    options = json.dumps(remote.storage_options)
    assert cli("sync", remote.url, "--storage-options", options, store=home).returncode == 0
    _wipe(remote, keep_config=keep_config)

    plain = cli("sync", remote.url, "--storage-options", options, store=home)
    assert plain.returncode == 0 and "pushed 0 checkpoints" in plain.stdout  # the index alone believes all is there
    rechecked = cli("sync", remote.url, "--recheck", "--storage-options", options, store=home)
    assert rechecked.returncode == 0, rechecked.stderr
    assert f"pushed {len(made)} checkpoints" in rechecked.stdout and "lacked 6 checkpoints" in rechecked.stdout
    _assert_whole(remote, made, tmp_path / "fresh-cli")
    status = json.loads(cli("status", "--json", store=home).stdout)["remotes"][0]["last_reconciliation"]
    assert status["lost_entries"] == 6 and status["repushed_entries"] == 6 and status["config_recreated"] == (not keep_config)
    assert "last recheck:" in cli("status", store=home).stdout

    _wipe(remote, keep_config=keep_config)
    with agentfs.open(home) as store, store.sync(remote.url, remote.storage_options, reconcile_interval=0.5) as daemon:
        deadline = time.monotonic() + 30
        while (daemon.last_reconciliation or {}).get("repushed_entries") != 6:
            assert time.monotonic() < deadline, daemon.status()
            time.sleep(0.1)
        assert daemon.status()["last_reconciliation"]["lost_objects"] > 0
    _assert_whole(remote, made, tmp_path / "fresh-daemon")
