"""The CLI of encrypted stores: init --encrypt, exit code 5, key add/list/remove/passwd, copy --encrypt."""

from __future__ import annotations

from pathlib import Path

import agentfs
from tests.test_cli import cli, json_of
from tests.test_encryption import CANARIES, every_byte

OLD, NEW = "old passphrase", "new passphrase"


def test_init_encrypt_and_a_wrong_passphrase_exits_5(tmp_path: Path) -> None:
    store = tmp_path / "store"
    assert cli("init", "--encrypt", store=store, env={"AGENTFS_PASSWORD": OLD}).returncode == 0
    with agentfs.open(store, encryption=OLD) as opened:
        opened.run("r").commit({"v": 1})
    assert "\nr " in cli("runs", store=store, env={"AGENTFS_PASSWORD": OLD}).stdout
    wrong = cli("runs", store=store, env={"AGENTFS_PASSWORD": "nope"})
    assert wrong.returncode == 5
    assert wrong.stderr.strip() == f"agentfs: error: wrong passphrase for {store}"
    assert cli("runs", store=store).returncode == 5  # none given (and no terminal to ask in)


def test_key_slots_change_without_rewriting_data(tmp_path: Path) -> None:
    store = tmp_path / "store"
    cli("init", "--encrypt", store=store, env={"AGENTFS_PASSWORD": OLD})
    with agentfs.open(store, encryption=OLD) as opened:
        opened.run("r").commit({"v": 1})
    segments = {p.name: p.read_bytes() for p in (store / "segments").iterdir()}
    key_file = tmp_path / "agentfs.key"
    added = cli("key", "add", "--new-key-file", str(key_file), "--label", "backup", store=store, env={"AGENTFS_PASSWORD": OLD})
    assert added.returncode == 0, added.stderr
    assert key_file.stat().st_mode & 0o777 == 0o600
    slots = json_of(cli("key", "list", "--json", store=store, env={"AGENTFS_PASSWORD": OLD}))
    assert sorted(slot["type"] for slot in slots) == ["key-file", "passphrase"]
    assert cli("--key-file", str(key_file), "runs", store=store).returncode == 0
    changed = cli("key", "passwd", store=store, env={"AGENTFS_PASSWORD": OLD, "AGENTFS_NEW_PASSWORD": NEW})
    assert changed.returncode == 0, changed.stderr
    assert cli("runs", store=store, env={"AGENTFS_PASSWORD": OLD}).returncode == 5
    assert cli("runs", store=store, env={"AGENTFS_PASSWORD": NEW}).returncode == 0
    file_slot = next(slot["slot"] for slot in slots if slot["type"] == "key-file")
    assert cli("key", "remove", file_slot, store=store, env={"AGENTFS_PASSWORD": NEW}).returncode == 0
    assert cli("--key-file", str(key_file), "runs", store=store).returncode == 5
    last = json_of(cli("key", "list", "--json", store=store, env={"AGENTFS_PASSWORD": NEW}))
    assert len(last) == 1
    refused = cli("key", "remove", last[0]["slot"], store=store, env={"AGENTFS_PASSWORD": NEW})
    assert refused.returncode == 5 and "last one" in refused.stderr
    assert {p.name: p.read_bytes() for p in (store / "segments").iterdir()} == segments  # no byte of data rewritten


def test_copy_encrypt_moves_a_plaintext_store_to_an_encrypted_one(tmp_path: Path) -> None:
    source, target = tmp_path / "plain", tmp_path / "encrypted"
    with agentfs.open(source) as store:
        run = store.run(CANARIES["run"])
        run.commit({CANARIES["state_key"]: 1}, metadata={"m": CANARIES["metadata"]})
        run.commit({CANARIES["state_key"]: 2}, artifacts={CANARIES["artifact_name"]: CANARIES["artifact"].encode() * 100})
    copied = cli("copy", "--encrypt", str(source), str(target), env={"AGENTFS_NEW_PASSWORD": NEW})
    assert copied.returncode == 0, copied.stderr
    data = every_byte(target)
    assert not any(canary.encode() in data for canary in CANARIES.values())
    with agentfs.open(target, encryption=NEW) as store:
        history = store.run(CANARIES["run"]).history()
        assert [cp.state for cp in history] == [{CANARIES["state_key"]: 2}, {CANARIES["state_key"]: 1}]
        assert history[1].metadata == {"m": CANARIES["metadata"]}
        assert history[0].artifacts[CANARIES["artifact_name"]].read_bytes() == CANARIES["artifact"].encode() * 100
