"""Repair from a remote: `agentfs verify --repair` replaces corrupt or missing local objects,
entries and records with verified remote copies (never a byte that does not verify), and a store
opened with a remote repairs a corrupt record it reads. Real stores, a file remote, the CLI."""

from __future__ import annotations

from pathlib import Path

import fsspec

import agentfs
from agentfs.format import kinds
from tests.cli.test_cli import cli
from tests.helpers import raw, remote_raw


def _flip(path: Path, at: int = -5) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0xFF
    path.write_bytes(bytes(data))


def _pushed(tmp_path: Path) -> tuple[Path, str, list[str]]:
    home = tmp_path / "home"
    url = (tmp_path / "remote").as_uri()
    with agentfs.open(home) as store:
        run = store.run("r")
        ids = [run.commit({"step": n}, artifacts={"big.bin": bytes([n]) * 200_000}).id for n in range(3)]
        run.once("tool", lambda: "result")
    assert cli("sync", url, store=home).returncode == 0
    return home, url, ids


def _objects(home: Path) -> list[bytes]:
    return sorted(raw.object_ids(home))


def test_verify_repair_replaces_corrupt_and_missing_data_with_verified_remote_copies(tmp_path: Path) -> None:
    home, url, ids = _pushed(tmp_path)
    objects = _objects(home)
    raw.corrupt_object(home, objects[0])
    raw.delete_object(home, objects[1])
    raw.set_record_bytes(home, "r", raw.LOG_RECORDS, ids[1], raw.record_bytes(home, "r", raw.LOG_RECORDS, ids[1])[:30])
    raw.corrupt_record(home, "r", raw.JOURNAL_RECORDS, raw.record_ids(home, "r", raw.JOURNAL_RECORDS)[0])
    assert cli("verify", store=home).returncode == 1

    repaired = cli("verify", "--repair", "--remote", url, store=home)
    assert repaired.returncode == 0, repaired.stdout + repaired.stderr
    assert f"checkpoint r@{ids[1]}" in repaired.stderr and "journal record" in repaired.stderr and "repaired object" in repaired.stderr
    assert repaired.stdout.strip().endswith(": ok")
    with agentfs.open(home) as store:
        for n, checkpoint_id in enumerate(ids):
            checkpoint = store.run("r").get(checkpoint_id)
            assert checkpoint.state == {"step": n} and checkpoint.artifacts["big.bin"].read_bytes() == bytes([n]) * 200_000
        assert store.run("r").once("tool", lambda: "ran again") == "result"

    raw.corrupt_object(home, _objects(home)[2])
    assert cli("verify", "--repair", store=home).returncode == 0  # from the remote it synced with
    assert cli("verify", store=home).returncode == 0


def test_repair_never_installs_a_remote_copy_that_does_not_verify(tmp_path: Path) -> None:
    home, url, _ids = _pushed(tmp_path)
    target = _objects(home)[0]
    raw.corrupt_object(home, target)
    ours = raw.object_bytes(home, target)
    remote_raw.flip_in_record(fsspec.filesystem("file"), str(tmp_path / "remote"), kinds.OBJECT, target)  # inside its pack frame
    repaired = cli("verify", "--repair", "--remote", url, store=home)
    assert repaired.returncode == 1 and "does not verify either" in repaired.stderr
    assert raw.object_bytes(home, target) == ours  # left as it was, the remote's bad bytes never installed


def test_a_store_opened_with_its_remote_repairs_a_corrupt_record_it_reads(tmp_path: Path) -> None:
    home, url, ids = _pushed(tmp_path)
    raw.set_record_bytes(home, "r", raw.LOG_RECORDS, ids[2], raw.record_bytes(home, "r", raw.LOG_RECORDS, ids[2])[:30])
    for oid in _objects(home):
        raw.corrupt_object(home, oid)
    with agentfs.open(home, remote=url) as store:
        latest = store.run("r").latest()
        assert latest.id == ids[2] and latest.state == {"step": 2}
        assert latest.artifacts["big.bin"].read_bytes() == bytes([2]) * 200_000
    with agentfs.open(home) as store:
        assert store.run("r").damaged() == []
        assert store.run("r").get(ids[2]).state == {"step": 2}
