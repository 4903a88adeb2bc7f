"""Sync you can trust (issue 11, the parts that do not depend on the storage format).

Ids made behind a skewed clock, create-only keys compared, bytes re-hashed before upload, remotes
identified by their config, remote failures as RemoteError, prompt shutdown, status after a
one-shot sync, one remote per directory however its URL is spelled. Real processes, real files,
moto's S3 server.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import agentfs
from agentfs.sync.push import Pusher
from agentfs.sync.remote import Remote
from tests.clock import skewed_env
from tests.helpers import raw
from tests.servers import RemoteSpec
from tests.test_cli import cli, json_of

pytest_plugins = ["tests.servers"]

HELPERS = Path(__file__).parent / "helpers"


def remote_entry_ids(remote_dir: Path, run: str) -> list[str]:
    return sorted(p.name for p in (remote_dir / "runs" / run / "log").iterdir())


def test_machines_behind_the_head_they_resume_from_make_distinct_ids_and_push_both(tmp_path: Path) -> None:
    remote_dir = tmp_path / "remote"
    url = remote_dir.as_uri()
    ahead = subprocess.run(
        [sys.executable, "-c", "import time; print(time.time())"], env=skewed_env("+1h"), capture_output=True, text=True, check=True
    )
    assert float(ahead.stdout) - time.time() > 3000, "libfaketime does not move this Python's clock"
    writer = (
        "import sys, agentfs\n"
        "with agentfs.open(sys.argv[1]) as store:\n"
        "    store.run('shared').commit({'step': 0})\n"
        "    with store.sync(sys.argv[2]) as daemon:\n"
        "        assert daemon.flush(timeout=20)\n"
    )
    subprocess.run([sys.executable, "-c", writer, str(tmp_path / "ahead"), url], env=skewed_env("+1h"), check=True, timeout=60)
    (head,) = remote_entry_ids(remote_dir, "shared")

    machines = [
        subprocess.Popen(
            [sys.executable, str(HELPERS / "resume_commit.py"), str(tmp_path / f"machine-{n}"), url, "shared"],
            env=skewed_env("-5s"),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for n in range(2)
    ]
    for machine in machines:
        assert machine.stdout is not None and machine.stdout.readline().split() == ["ready", head]
    for machine in machines:  # both commit on the same head at (nearly) the same moment
        assert machine.stdin is not None
        machine.stdin.write("go\n")
        machine.stdin.flush()
    made = []
    for machine in machines:
        out, _ = machine.communicate(timeout=60)
        assert machine.returncode == 0, out
        made.append(out.split()[-1])
    assert made[0] != made[1]
    assert all(made_id > head for made_id in made)
    assert remote_entry_ids(remote_dir, "shared") == sorted([head, *made])
    with agentfs.open(tmp_path / "reader", remote=url) as reader:
        assert {cp.parent for cp in reader.run("shared").history() if cp.id != head} == {head}


# --- a create-only key that exists is compared, never assumed ours ---------------------------------


@pytest.mark.parametrize("remote", ["file", "s3"], indirect=True)
def test_a_taken_key_with_other_bytes_is_an_error_and_not_marked_pushed(remote: RemoteSpec, tmp_path: Path) -> None:
    with agentfs.open(tmp_path / "a") as store:
        mine = store.run("main").commit({"step": 1})
        theirs = store.run("other").commit({"step": 1})
        fs, root = remote.connect()
        taken = f"{root.rstrip('/')}/runs/main/log/{mine.id}"
        fs.pipe_file(taken, b"another machine's checkpoint")
        pusher = Pusher(store, Remote(remote.url, remote.storage_options))
        with pytest.raises(agentfs.RemoteError) as raised:
            pusher.push()
        assert remote.url in str(raised.value) and f"runs/main/log/{mine.id}" in str(raised.value)
        assert ("main", mine.id) in pusher.pending()  # not marked pushed: status keeps the lag
        assert fs.cat_file(taken) == b"another machine's checkpoint"

        # the same bytes under a taken key are success: that checkpoint is on the remote
        fs.rm_file(taken)
        fs.pipe_file(taken, raw.record_bytes(store, "main", raw.LOG, mine.id))
        Pusher(store, Remote(remote.url, remote.storage_options)).push()
        assert Pusher(store, Remote(remote.url, remote.storage_options)).pending() == []
    with agentfs.open(tmp_path / "b", remote=remote.url, storage_options=remote.storage_options) as reader:
        assert reader.run("main").latest().state == {"step": 1}
        assert reader.run("other").latest().id == theirs.id


# --- every byte re-hashed before upload ------------------------------------------------------------


def test_a_corrupt_local_object_is_refused_by_name_and_the_rest_is_pushed(tmp_path: Path) -> None:
    source = tmp_path / "a"
    remote_dir = tmp_path / "remote"
    with agentfs.open(source) as store:
        bad = store.run("bad").commit({"step": 1}, artifacts={"blob.bin": os.urandom(50_000)})
        good = store.run("good").commit({"step": 1}, artifacts={"blob.bin": os.urandom(50_000)})
        oid = store.read_entry("bad", bad.id).manifest.artifacts["blob.bin"][1]
    original = raw.corrupt_object(source, oid)
    flipped = raw.object_bytes(source, oid)

    synced = cli("sync", remote_dir.as_uri(), store=source)
    assert synced.returncode == 4, synced.stderr
    assert oid.hex() in synced.stderr and f"bad@{bad.id}" in synced.stderr
    assert "Traceback" not in synced.stderr
    uploaded = {p.read_bytes() for p in remote_dir.rglob("*") if p.is_file()}
    assert flipped not in uploaded and not (remote_dir / "objects" / oid.hex()[:2] / oid.hex()[2:]).exists()
    assert not (remote_dir / "runs" / "bad" / "log" / bad.id).exists()
    assert (remote_dir / "runs" / "good" / "log" / good.id).exists()
    status = json_of(cli("status", "--json", store=source))["remotes"][0]
    assert status["lag_checkpoints"] == 1 and oid.hex() in status["last_error"]

    raw.set_object_bytes(source, oid, original)  # repaired: the next sync pushes it
    assert cli("sync", remote_dir.as_uri(), store=source).returncode == 0
    assert (remote_dir / "runs" / "bad" / "log" / bad.id).exists()
