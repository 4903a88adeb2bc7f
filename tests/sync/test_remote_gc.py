"""Remote gc: retired checkpoints and unreferenced objects leave a remote, safely while others push."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import fsspec
import pytest

import agentfs
from agentfs.cli.main import main as cli
from agentfs.format import kinds
from agentfs.sync.pack_remote import PackRemote
from agentfs.sync.pull import pull
from agentfs.sync.push import Pusher
from agentfs.sync.remote_gc import GcBarrier, list_markers, remote_gc
from agentfs.sync.remote_verify import verify_remote
from tests.helpers import remote_raw, workload
from tests.servers import RemoteSpec, make_s3_spec

SETTLE = 3.0


def _push(store: agentfs.Store, spec: RemoteSpec) -> None:
    Pusher(store.engine, PackRemote(spec.url, spec.storage_options), workers=4).push()


def test_retired_checkpoints_and_their_objects_leave_the_remote(tmp_path: Path, remote: RemoteSpec) -> None:
    with agentfs.open(tmp_path / "a") as store:
        run = store.run("agent")
        ids = [run.commit(workload.make_state(step), artifacts=workload.make_artifacts(step)).id for step in range(12)]
        _push(store, remote)
        rem = PackRemote(remote.url, remote.storage_options)
        objects_before = set(rem.list_objects())

        report = run.prune(keep_last=3)
        _push(store, remote)  # sends the retirement record
        first = remote_gc(rem, store.engine, grace=3600, settle=SETTLE)
        assert first.entries_deleted == len(report.removed) and first.objects_deleted == 0 and first.kept_young > 0
        assert sorted(rem.list_ids("agent")) == sorted(set(ids) - set(report.removed))
        second = remote_gc(rem, store.engine, grace=0, settle=SETTLE)
        assert second.objects_deleted == first.kept_young > 0
        assert set(rem.list_objects()) < objects_before
        check = verify_remote(rem, deep=True)
        assert check.ok, str(check)
        assert {kinds for kinds in (frozenset(k) for k in list_markers(rem.transport).values())} == {frozenset({"intent", "plan", "done"})}

    with agentfs.open(tmp_path / "b", remote=remote.url, storage_options=remote.storage_options) as other:
        latest = other.run("agent").latest()
        assert latest is not None and latest.id == ids[-1] and latest.state == workload.make_state(11)
    with agentfs.open(tmp_path / "c") as fresh:
        pull(fresh.engine, PackRemote(remote.url, remote.storage_options))
        assert fresh.run("agent").ids() == sorted(set(ids) - set(report.removed))
        assert fresh.verify().ok


def test_a_pusher_that_saw_a_gc_uploads_again_what_it_deleted(tmp_path: Path, moto_server: object) -> None:
    """Local prune + gc, remote gc, then the same content committed again: the index must not vouch for it."""
    spec = make_s3_spec(moto_server)  # type: ignore[arg-type]
    with agentfs.open(tmp_path / "a") as store:
        run = store.run("agent")
        pusher = Pusher(store.engine, PackRemote(spec.url, spec.storage_options), workers=4)
        payload = os.urandom(50_000)
        run.commit({"blob": payload})
        run.commit({"blob": b"other"})
        pusher.push()
        run.prune(keep_last=1)
        store.gc(grace=0)
        pusher.push()
        gc = remote_gc(PackRemote(spec.url, spec.storage_options), store.engine, grace=0, settle=SETTLE)
        assert gc.objects_deleted >= 1
        run.commit({"blob": payload})  # the deleted object again, written anew locally
        stats = pusher.push()
        assert stats.objects >= 1, "the pusher trusted its index for an object the remote gc deleted"
        check = verify_remote(PackRemote(spec.url, spec.storage_options), deep=True)
        assert check.ok, str(check)
        index_objects = (store.engine.remotes_dir / pusher.index.directory.name / "objects").read_bytes()
        assert len(index_objects) % 32 == 0


def test_the_barrier_waits_for_a_running_gc_and_ignores_an_abandoned_one(tmp_path: Path) -> None:
    url = (tmp_path / "remote").as_uri()
    rem = PackRemote(url, {"auto_mkdir": True})
    with agentfs.open(tmp_path / "a") as store:
        store.run("r").commit({"x": 1})
        pusher = Pusher(store.engine, rem, workers=2)
        pusher.push()
        stale = {"format": 1, "created": time.time() - 10_000, "settle": 30, "slack": 120}
        rem.transport.create(rem.transport.key("gc", "01J000000000000000000000AA.intent"), json.dumps(stale).encode())
        started = time.monotonic()
        assert GcBarrier(rem, pusher.index).check(force=True) is False
        assert time.monotonic() - started < 2, "an abandoned gc (no plan long after settling) must not block pushes"
        running = {"format": 1, "created": time.time(), "settle": 30, "slack": 120}
        rem.transport.create(rem.transport.key("gc", "01J000000000000000000000AB.intent"), json.dumps(running).encode())
        oid = next(iter(pusher.index.objects), None)
        plan = {"format": 1, "deadline": time.time() + 60, "objects": [oid.hex()] if oid else [], "entries": []}

        def finish() -> None:
            time.sleep(1.0)
            rem.transport.create(rem.transport.key("gc", "01J000000000000000000000AB.plan"), json.dumps(plan).encode())
            rem.transport.create(rem.transport.key("gc", "01J000000000000000000000AB.done"), b"{}")

        import threading

        threading.Thread(target=finish).start()
        started = time.monotonic()
        GcBarrier(rem, pusher.index).check(force=True)
        assert time.monotonic() - started >= 0.9, "the barrier did not wait for the running gc"
        assert "01J000000000000000000000AB" in pusher.index.gc_seen
        assert oid is None or oid not in pusher.index.objects


def test_cli_remote_gc_and_verify(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = (tmp_path / "remote").as_uri()
    root = str(tmp_path / ".agentfs")
    with agentfs.open(root) as store:
        for step in range(6):
            store.run("r").commit(workload.make_state(step))
    assert cli(["--store", root, "sync", url]) == 0
    assert cli(["--store", root, "prune", "r", "--keep-last", "3"]) == 0  # step 3 keeps chunked objects
    assert cli(["--store", root, "sync", url]) == 0
    capsys.readouterr()
    assert cli(["--store", root, "gc", "--remote", url, "--grace", "0", "--settle", "3", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["entries_deleted"] >= 1 and report["objects_deleted"] >= 1
    assert cli(["--store", root, "verify", "--remote", url, "--deep"]) == 0
    assert capsys.readouterr().out.rstrip().endswith(": ok")
    with pytest.raises(SystemExit) as usage:  # settle below the pushers' recheck
        cli(["--store", root, "gc", "--remote", url, "--settle", "1"])
    assert usage.value.code == 2
    # damage is found: a byte flipped inside an object an entry uses
    fs, remote_root = fsspec.filesystem("file"), str(tmp_path / "remote")
    used = [key for kind, key in remote_raw.frames(fs, remote_root) if kind == kinds.OBJECT]
    remote_raw.flip_in_record(fs, remote_root, kinds.OBJECT, used[0])
    assert cli(["--store", root, "verify", "--remote", url, "--deep"]) == 1
