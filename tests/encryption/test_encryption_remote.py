"""Encrypted stores with a remote: nothing readable on it, machines sharing it resume and append, dedup kept."""

from __future__ import annotations

from pathlib import Path

import fsspec
import pytest

import agentfs
from agentfs.sync.pack_remote import PackRemote
from agentfs.sync.pull import pull
from agentfs.sync.push import Pusher
from tests.encryption.test_encryption import CANARIES, PASSPHRASE, encryption, every_byte, fill
from tests.servers import MotoServer, RemoteSpec, make_file_spec, make_s3_spec


@pytest.fixture(params=["file", "s3"])
def spec(request: pytest.FixtureRequest, tmp_path: Path) -> RemoteSpec:
    if request.param == "file":
        return make_file_spec(tmp_path)
    moto: MotoServer = request.getfixturevalue("moto_server")
    return make_s3_spec(moto)


def remote_bytes(spec: RemoteSpec) -> bytes:
    """Every key name and body on the remote."""
    fs, root = fsspec.core.url_to_fs(spec.url, **spec.storage_options)
    fs.invalidate_cache()
    names = sorted(fs.find(root))
    assert names
    return b"\0".join(name.encode() + b"\0" + fs.cat_file(name) for name in names)


def push(store: agentfs.Store, spec: RemoteSpec) -> None:
    Pusher(store.engine, PackRemote(spec.url, spec.storage_options)).push()


def test_no_canary_on_the_remote_nor_in_the_store_after_a_push(tmp_path: Path, spec: RemoteSpec) -> None:
    root = tmp_path / "store"
    with agentfs.open(root, encryption=encryption()) as store:
        fill(store)
        push(store, spec)
    on_remote, local = remote_bytes(spec), every_byte(root)
    for what, canary in CANARIES.items():
        assert canary.encode() not in on_remote, f"the {what} canary is readable on the remote"
        assert canary.encode() not in local, f"the {what} canary is readable in the store after a push"
    assert b"keys/" in on_remote  # the key slots travel, wrapped


def test_a_second_machine_resumes_appends_and_the_first_resumes_its_work(tmp_path: Path, spec: RemoteSpec) -> None:
    run_name = f"agents/{CANARIES['run']}"
    artifact = b"shared artifact bytes\n" * 20_000
    with agentfs.open(tmp_path / "a", encryption=encryption()) as first:
        first.run(run_name).commit({"step": 1}, artifacts={"notes.txt": artifact})
        first.run(run_name).journal.once(CANARIES["journal_key"], lambda: CANARIES["journal_result"])
        push(first, spec)
    # machine B: an empty directory, the remote, the passphrase
    with agentfs.open(tmp_path / "b", remote=spec.url, storage_options=spec.storage_options, encryption=PASSPHRASE) as second:
        head = second.run(run_name).latest()
        assert head is not None and head.state == {"step": 1}
        assert head.artifacts["notes.txt"].read_bytes() == artifact
        assert second.run(run_name).journal.get(CANARIES["journal_key"]).result == CANARIES["journal_result"]
        second.run(run_name).commit({"step": 2}, artifacts={"notes.txt": artifact}, parent=head.id)
        pusher = Pusher(second.engine, PackRemote(spec.url, spec.storage_options))
        stats = pusher.push()
        assert stats.objects == 0  # same key, same ids: the artifact B stores again is not uploaded again
    # machine A pulls B's checkpoint and appends after it
    with agentfs.open(tmp_path / "a", encryption=PASSPHRASE) as first:
        pull(first.engine, PackRemote(spec.url, spec.storage_options))
        head = first.run(run_name).latest()
        assert head is not None and head.state == {"step": 2}
        first.run(run_name).commit({"step": 3}, parent=head.id)
        push(first, spec)
    with agentfs.open(tmp_path / "c", remote=spec.url, storage_options=spec.storage_options, encryption=PASSPHRASE) as third:
        assert third.runs() == [run_name]
        assert [cp.state["step"] for cp in third.run(run_name).history()] == [3, 2, 1]
    assert CANARIES["run"].encode() not in remote_bytes(spec)


def test_a_wrong_passphrase_or_a_plaintext_store_is_refused_by_an_encrypted_remote(tmp_path: Path, spec: RemoteSpec) -> None:
    with agentfs.open(tmp_path / "a", encryption=encryption()) as first:
        first.run("r").commit({"v": 1})
        push(first, spec)
    with pytest.raises(agentfs.WrongKey, match="wrong passphrase"):
        agentfs.open(tmp_path / "b", remote=spec.url, storage_options=spec.storage_options, encryption="not it")
    with agentfs.open(tmp_path / "plain") as plain:
        plain.run("r").commit({"v": 1})
        with pytest.raises(agentfs.WrongKey, match="is encrypted"):
            push(plain, spec)
    with agentfs.open(tmp_path / "other", encryption=encryption()) as other:  # another master key
        other.run("r").commit({"v": 1})
        with pytest.raises(agentfs.WrongKey, match="another master key"):
            push(other, spec)


def test_verify_remote_reads_an_encrypted_remote_with_the_stores_keys_only(tmp_path: Path) -> None:
    from agentfs.sync.remote_verify import verify_remote

    spec = make_file_spec(tmp_path)
    with agentfs.open(tmp_path / "store", encryption=encryption()) as store:
        store.run("r").commit({"v": 1}, artifacts={"a.bin": b"x" * 100_000})
        push(store, spec)
        remote = PackRemote(spec.url, spec.storage_options)
        remote.sealer = store.engine.sealer
        report = verify_remote(remote, deep=True)
        assert report.ok and report.entries == 1, report.problems
    with pytest.raises(agentfs.WrongKey, match="is encrypted"):
        verify_remote(PackRemote(spec.url, spec.storage_options))


def test_stats_of_an_encrypted_store_count_what_its_remote_holds(tmp_path: Path) -> None:
    spec = make_file_spec(tmp_path)
    with agentfs.open(tmp_path / "store", encryption=encryption()) as store:
        store.run("a").commit({"v": 1})
        push(store, spec)
        store.run("a").commit({"v": 2})
        (remote,) = store.stats().remotes
        assert (remote.pushed_checkpoints, remote.lag_checkpoints) == (1, 1)


def test_remote_gc_of_an_encrypted_remote_keeps_what_is_live(tmp_path: Path) -> None:
    from agentfs.sync.remote_gc import remote_gc
    from agentfs.sync.remote_verify import verify_remote

    spec = make_file_spec(tmp_path)
    with agentfs.open(tmp_path / "store", encryption=encryption()) as store:
        run = store.run(f"agents/{CANARIES['run']}")
        for step in range(4):
            run.commit({"step": step}, artifacts={"a.bin": bytes([step]) * 50_000})
        push(store, spec)
        run.prune(keep_last=1)
        push(store, spec)  # the retirement record
        report = remote_gc(PackRemote(spec.url, spec.storage_options), store.engine, grace=0, settle=3)
        assert report.entries_deleted == 3 and report.objects_deleted > 0
        remote = PackRemote(spec.url, spec.storage_options)
        remote.sealer = store.engine.sealer
        assert verify_remote(remote, deep=True).ok
    with agentfs.open(tmp_path / "b", remote=spec.url, storage_options=spec.storage_options, encryption=PASSPHRASE) as other:
        head = other.run(f"agents/{CANARIES['run']}").latest()
        assert head is not None and head.state == {"step": 3}
        assert head.artifacts["a.bin"].read_bytes() == bytes([3]) * 50_000
    assert CANARIES["run"].encode() not in remote_bytes(spec)
