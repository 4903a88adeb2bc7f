"""Issue 11, second half: repair. `agentfs verify --repair` replaces corrupt or missing local objects,
entries and records with verified remote copies (never a byte that does not verify), and a store
opened with a remote repairs a corrupt record it reads. Real stores, a file remote, the CLI."""

from __future__ import annotations

from pathlib import Path

import agentfs
from tests.test_cli import cli


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


def _object_files(home: Path) -> list[Path]:
    return sorted(p for p in (home / "objects").rglob("*") if p.is_file())


def test_verify_repair_replaces_corrupt_and_missing_data_with_verified_remote_copies(tmp_path: Path) -> None:
    home, url, ids = _pushed(tmp_path)
    objects = _object_files(home)
    _flip(objects[0])
    objects[1].unlink()
    entry = home / "runs" / "r" / "log" / ids[1]
    entry.write_bytes(entry.read_bytes()[:30])
    (journal,) = list((home / "runs" / "r" / "journal").iterdir())[:1]
    _flip(journal, 10)
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

    objects = _object_files(home)
    _flip(objects[2])
    assert cli("verify", "--repair", store=home).returncode == 0  # from the remote it synced with
    assert cli("verify", store=home).returncode == 0


def test_repair_never_installs_a_remote_copy_that_does_not_verify(tmp_path: Path) -> None:
    home, url, _ids = _pushed(tmp_path)
    target = _object_files(home)[0]
    _flip(target)
    ours = target.read_bytes()
    remote_copy = tmp_path / "remote" / target.relative_to(home)
    _flip(remote_copy, 7)
    repaired = cli("verify", "--repair", "--remote", url, store=home)
    assert repaired.returncode == 1 and "does not verify either" in repaired.stderr
    assert target.read_bytes() == ours  # left as it was, the remote's bad bytes never installed


def test_a_store_opened_with_its_remote_repairs_a_corrupt_record_it_reads(tmp_path: Path) -> None:
    home, url, ids = _pushed(tmp_path)
    entry = home / "runs" / "r" / "log" / ids[2]
    entry.write_bytes(entry.read_bytes()[:30])
    for path in _object_files(home):
        _flip(path)
    with agentfs.open(home, remote=url) as store:
        latest = store.run("r").latest()
        assert latest.id == ids[2] and latest.state == {"step": 2}
        assert latest.artifacts["big.bin"].read_bytes() == bytes([2]) * 200_000
    with agentfs.open(home) as store:
        assert store.run("r").damaged() == []
        assert store.run("r").get(ids[2]).state == {"step": 2}
