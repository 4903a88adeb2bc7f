"""What a push checks before it trusts its bytes and the remote's keys: ids made behind a skewed clock stay
distinct and both go up; a create-only key already taken with other bytes is an error, not marked pushed; a
corrupt local object is refused by name and the rest is pushed. Real processes, real files, moto's S3 server.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import fsspec
import pytest

import agentfs
from agentfs.format import keys, kinds
from agentfs.format.pack import encode_head
from agentfs.format.refs import LooseRef
from agentfs.sync.pack_remote import PackRemote
from agentfs.sync.push import Pusher
from tests.cli.test_cli import cli, json_of
from tests.clock import skewed_env
from tests.helpers import raw, remote_raw
from tests.servers import RemoteSpec

HELPERS = Path(__file__).parents[1] / "helpers"


def remote_entry_ids(remote_dir: Path, run: str) -> list[str]:
    """The run's checkpoints the remote's pack indexes name."""
    return sorted(remote_raw.entry_ids(fsspec.filesystem("file"), str(remote_dir), run))


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
    for machine in machines:  # both committed before either pushes (helpers/resume_commit.py)
        assert machine.stdout is not None and machine.stdout.readline().split()[0] == "committed"
    for machine in machines:
        assert machine.stdin is not None
        machine.stdin.write("push\n")
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
        taken = f"{root.rstrip('/')}/{'/'.join(keys.head_key('main', mine.id))}"  # the head key this push will write
        theirs_bytes = encode_head("another/run", mine.id, [])
        fs.pipe_file(taken, theirs_bytes)
        pusher = Pusher(store.engine, PackRemote(remote.url, remote.storage_options))
        with pytest.raises(agentfs.FormatError) as raised:
            pusher.push()
        assert remote.url in str(raised.value) and f"head key main@{mine.id}" in str(raised.value)
        assert fs.cat_file(taken) == theirs_bytes  # never overwritten

        # a head key already holding what this push would say (a head key for that checkpoint) is success
        fs.rm_file(taken)
        fs.pipe_file(taken, encode_head("main", mine.id, []))
        Pusher(store.engine, PackRemote(remote.url, remote.storage_options)).push()
        assert Pusher(store.engine, PackRemote(remote.url, remote.storage_options)).pending() == []
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
        ref = store.engine.read_entry("bad", bad.id).manifest.artifacts["blob.bin"]
        assert isinstance(ref, LooseRef)
        oid = ref.oid
    original = raw.corrupt_object(source, oid)
    flipped = raw.object_bytes(source, oid)

    file_fs = fsspec.filesystem("file")
    synced = cli("sync", remote_dir.as_uri(), store=source)
    assert synced.returncode == 4, synced.stderr
    assert oid.hex() in synced.stderr and f"bad@{bad.id}" in synced.stderr
    assert "Traceback" not in synced.stderr
    uploaded = b"".join(p.read_bytes() for p in remote_dir.rglob("*") if p.is_file())
    assert flipped not in uploaded and (kinds.OBJECT, oid) not in remote_raw.frames(file_fs, str(remote_dir))
    assert remote_entry_ids(remote_dir, "bad") == [] and not remote_raw.has_head(file_fs, str(remote_dir), "bad", bad.id)
    assert remote_entry_ids(remote_dir, "good") == [good.id] and remote_raw.has_head(file_fs, str(remote_dir), "good", good.id)
    status = json_of(cli("status", "--json", store=source))["remotes"][0]
    assert status["lag_checkpoints"] == 1 and oid.hex() in status["last_error"]

    raw.set_object_bytes(source, oid, original)  # repaired: the next sync pushes it
    assert cli("sync", remote_dir.as_uri(), store=source).returncode == 0
    assert remote_entry_ids(remote_dir, "bad") == [bad.id] and remote_raw.has_head(file_fs, str(remote_dir), "bad", bad.id)
