"""The CLI of encrypted stores: init --encrypt, exit code 5, key add/list/remove/passwd, copy --encrypt.

Most commands run in-process (`main`); the exit code and the error line are also checked through the
`agentfs` script once."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import agentfs
from agentfs.cli.main import main
from tests.cli.test_cli import cli
from tests.encryption.test_encryption import CANARIES, encryption, every_byte

OLD, NEW = "old passphrase", "new passphrase"


@pytest.fixture(autouse=True)
def no_secret_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AGENTFS_PASSWORD", "AGENTFS_PASSWORD_FILE", "AGENTFS_NEW_PASSWORD", "AGENTFS_STORE"):
        monkeypatch.delenv(name, raising=False)


def run(monkeypatch: pytest.MonkeyPatch, store: Path, *args: str, password: str | None = None, new: str | None = None) -> int:
    with monkeypatch.context() as env:
        if password is not None:
            env.setenv("AGENTFS_PASSWORD", password)
        if new is not None:
            env.setenv("AGENTFS_NEW_PASSWORD", new)
        return main(["--store", str(store), *args])


def test_init_encrypt_and_a_wrong_passphrase_exits_5(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = tmp_path / "store"
    assert run(monkeypatch, store, "init", "--encrypt", password=OLD) == 0
    with agentfs.open(store, encryption=OLD) as opened:
        opened.run("r").commit({"v": 1})
    assert run(monkeypatch, store, "runs", password=OLD) == 0
    assert run(monkeypatch, store, "runs", password="nope") == 5
    assert run(monkeypatch, store, "runs") == 5  # none given (and no terminal to ask in)
    assert run(monkeypatch, store, "upgrade", str(store)) == 0  # an encrypted store is format 2: nothing to do
    wrong = cli("runs", store=store, env={"AGENTFS_PASSWORD": "nope"})  # the script: exit code and one line
    assert (wrong.returncode, wrong.stderr) == (5, f"agentfs: error: wrong passphrase for {store}\n")


def test_key_slots_change_without_rewriting_data(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    store = tmp_path / "store"
    with agentfs.open(store, encryption=encryption(OLD)) as opened:  # a cheap scrypt: each open below runs it
        opened.run("r").commit({"v": 1})
    segments = {p.name: p.read_bytes() for p in (store / "segments").iterdir()}
    key_file = tmp_path / "agentfs.key"
    assert run(monkeypatch, store, "key", "add", "--new-key-file", str(key_file), "--label", "backup", password=OLD) == 0
    assert key_file.stat().st_mode & 0o777 == 0o600
    capsys.readouterr()
    assert run(monkeypatch, store, "key", "list", "--json", password=OLD) == 0
    slots = json.loads(capsys.readouterr().out)
    assert sorted(slot["type"] for slot in slots) == ["key-file", "passphrase"]
    assert run(monkeypatch, store, "--key-file", str(key_file), "runs") == 0
    assert run(monkeypatch, store, "key", "passwd", password=OLD, new=NEW) == 0
    assert run(monkeypatch, store, "runs", password=OLD) == 5
    assert run(monkeypatch, store, "runs", password=NEW) == 0
    file_slot = next(slot["slot"] for slot in slots if slot["type"] == "key-file")
    assert run(monkeypatch, store, "key", "remove", file_slot, password=NEW) == 0
    assert run(monkeypatch, store, "--key-file", str(key_file), "runs") == 5
    capsys.readouterr()
    run(monkeypatch, store, "key", "list", "--json", password=NEW)
    last = json.loads(capsys.readouterr().out)
    assert len(last) == 1
    assert run(monkeypatch, store, "key", "remove", last[0]["slot"], password=NEW) == 5
    assert "last one" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in (store / "segments").iterdir()} == segments  # no byte of data rewritten


def test_copy_encrypt_moves_a_plaintext_store_to_an_encrypted_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    source, target = tmp_path / "plain", tmp_path / "encrypted"
    with agentfs.open(source) as store:
        history = store.run(CANARIES["run"])
        history.commit({CANARIES["state_key"]: 1}, metadata={"m": CANARIES["metadata"]})
        history.commit({CANARIES["state_key"]: 2}, artifacts={CANARIES["artifact_name"]: CANARIES["artifact"].encode() * 100})
    assert run(monkeypatch, source, "copy", "--encrypt", str(source), str(target), new=NEW) == 0
    data = every_byte(target)
    assert not any(canary.encode() in data for canary in CANARIES.values())
    with agentfs.open(target, encryption=NEW) as store:
        checkpoints = store.run(CANARIES["run"]).history()
        assert [cp.state for cp in checkpoints] == [{CANARIES["state_key"]: 2}, {CANARIES["state_key"]: 1}]
        assert checkpoints[1].metadata == {"m": CANARIES["metadata"]}
        assert checkpoints[0].artifacts[CANARIES["artifact_name"]].read_bytes() == CANARIES["artifact"].encode() * 100


def test_passwd_takes_the_old_passphrase_off_the_remote_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from agentfs.sync.pack_remote import PackRemote
    from agentfs.sync.push import Pusher
    from tests.servers import make_file_spec

    spec = make_file_spec(tmp_path)
    store = tmp_path / "store"
    with agentfs.open(store, encryption=encryption(OLD)) as opened:
        opened.run("r").commit({"v": 1})
        Pusher(opened.engine, PackRemote(spec.url, spec.storage_options)).push()
    assert run(monkeypatch, store, "key", "passwd", password=OLD, new=NEW) == 0  # no push after it
    with pytest.raises(agentfs.WrongKey):
        agentfs.open(tmp_path / "b", remote=spec.url, storage_options=spec.storage_options, encryption=OLD)
    with agentfs.open(tmp_path / "c", remote=spec.url, storage_options=spec.storage_options, encryption=NEW) as other:
        assert other.run("r").latest().state == {"v": 1}


def test_clone_of_an_encrypted_remote_takes_its_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from agentfs.sync.pack_remote import PackRemote
    from agentfs.sync.push import Pusher
    from tests.servers import make_file_spec

    spec = make_file_spec(tmp_path)
    with agentfs.open(tmp_path / "store", encryption=encryption(OLD)) as opened:
        opened.run("r").commit({"v": 1})
        Pusher(opened.engine, PackRemote(spec.url, spec.storage_options)).push()
    target = tmp_path / "clone"
    assert run(monkeypatch, tmp_path / "unused", "clone", spec.url, str(target), password="nope") == 5
    assert not target.exists()  # a failed clone leaves nothing behind
    assert run(monkeypatch, tmp_path / "unused", "clone", spec.url, str(target), password=OLD) == 0
    with agentfs.open(target, encryption=OLD) as cloned:
        assert cloned.run("r").latest().state == {"v": 1}
