"""`agentfs copy [--encrypt]` is a faithful migration (core/store_copy.py): the same runs, checkpoint ids,
parents (divergence included), forks, creation times, writers, metadata, artifacts, journals and retention
policy, between plaintext and encrypted stores in every direction; what retention removed stays removed;
a remote's sync state is not carried: the copy is a new store, synced nowhere."""

from __future__ import annotations

import json
import os
import urllib.parse
from pathlib import Path
from typing import Any

import pytest

import agentfs
from agentfs.sync.pack_remote import PackRemote
from agentfs.sync.pull import pull
from agentfs.sync.push import Pusher
from tests.encryption.test_encryption import CANARIES, encryption, every_byte
from tests.encryption.test_encryption_cli import NEW, OLD, run

BIG = os.urandom(1 << 20)  # an artifact cut into a tree of chunks


def fill(store: agentfs.Store, key: str | None) -> None:
    """Every kind of thing a copy must keep: a divergence (pulled from a second machine), a fork, an artifact
    borrowed across runs, journals (a success, a failure, a run with only a journal), a pruned run, a policy."""
    main = store.run("agents/main")
    first = main.commit({"step": 1, "note": CANARIES["state_value"]}, metadata={"who": CANARIES["metadata"]})
    second = main.commit({"step": 2, "note": CANARIES["state_value"]}, artifacts={"big.bin": BIG, "small.txt": b"hello"})
    url = (store.root.parent / f"{store.root.name}-remote").as_uri()
    Pusher(store.engine, PackRemote(url, {})).push()
    with agentfs.open(store.root.parent / f"{store.root.name}-b", remote=url, encryption=key) as machine:
        machine.run("agents/main").commit({"step": "3b"}, parent=second.id)  # a second head of the same parent
        Pusher(machine.engine, PackRemote(url, {})).push()
    main.commit({"step": 3, "note": "x" * 5000}, parent=second.id, keep_artifacts=True)
    assert pull(store.engine, PackRemote(url, {})).diverged
    forked = main.fork(first.id, "agents/fork")
    forked.commit({"step": "fork 2"}, artifacts={"borrowed.bin": second.artifacts["big.bin"]})  # an artifact of another run
    main.once("search:cats", lambda: {"hits": 3})
    with pytest.raises(RuntimeError):
        main.once("search:dogs", _fails)
    store.run("journal-only").once("only", lambda: CANARIES["journal_result"])
    doomed = store.run("doomed")
    for step in range(4):
        doomed.commit({"step": step})
    doomed.prune(keep_last=1)
    store.set_retention(keep_last=50)


def _fails() -> None:
    raise RuntimeError("no dogs")


def picture(store: agentfs.Store) -> dict[str, Any]:
    """Everything a user sees of the store, but where its bytes lie."""
    runs: dict[str, Any] = {}
    for name in [*store.runs(), "journal-only"]:
        history = store.run(name)
        runs[name] = {
            "heads": history.heads(),
            "checkpoints": [
                (
                    cp.id,
                    cp.parent,
                    cp.created,
                    cp.writer,
                    cp.forked_from,
                    cp.metadata,
                    cp.state,
                    {artifact: cp.artifacts[artifact].read_bytes() for artifact in cp.artifacts},
                )
                for cp in history.history()
            ],
            "journal": history.journal.records(),
        }
    return {"runs": runs, "retention": store.engine.read_config().get("retention"), "forks": store.engine.forks_of("agents/main")}


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("copy") / "plain"
    with agentfs.open(root) as store:
        fill(store, None)
    return root


@pytest.fixture(scope="module")
def sealed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("copy") / "sealed"
    with agentfs.open(root, encryption=encryption(OLD)) as store:
        fill(store, OLD)
    return root


def test_the_filled_store_holds_what_the_copy_must_keep(plain: Path) -> None:
    with agentfs.open(plain) as store:
        seen = picture(store)
    main = seen["runs"]["agents/main"]
    assert len(main["heads"]) == 2 and len(main["checkpoints"]) == 4
    assert seen["runs"]["agents/fork"]["checkpoints"][-1][4] is not None  # forked_from
    assert len(seen["runs"]["doomed"]["checkpoints"]) == 1 and seen["retention"]["keep_last"] == 50
    assert {record.kind for record in main["journal"]} >= {"start", "ok", "error"}
    assert seen["runs"]["journal-only"]["journal"]


@pytest.mark.parametrize(
    ("origin", "encrypt"),
    [("plain", True), ("plain", False), ("sealed", False), ("sealed", True)],
    ids=["to-encrypted", "plain-to-plain", "to-plaintext", "encrypted-to-encrypted"],
)
def test_copy_keeps_ids_parents_forks_times_journals_and_policy(
    origin: str, encrypt: bool, request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    source: Path = request.getfixturevalue(origin)
    source_key = OLD if origin == "sealed" else None
    target = tmp_path / "copy"
    args = ["copy", *(["--encrypt"] if encrypt else []), str(source), str(target)]
    assert run(monkeypatch, source, *args, password=source_key, new=NEW if encrypt else None) == 0
    with agentfs.open(source, encryption=source_key) as original:
        expected = picture(original)
        source_id = original.id
    with agentfs.open(target, encryption=NEW if encrypt else None) as copy:
        assert picture(copy) == expected
        assert copy.id != source_id  # a new store
        assert copy.verify().ok
        retired = copy.run("doomed").ids()
    assert len(retired) == 1  # what retention removed is not brought back
    stored = sum(path.stat().st_size for path in (target / "segments").iterdir())
    assert stored < 2 * len(BIG)  # the artifact three checkpoints of two runs hold is stored once: dedup kept
    data = every_byte(target)
    assert (CANARIES["state_value"].encode() in data) is not encrypt
    assert (b"agents/main" in data) is not encrypt
    if not encrypt:  # the plaintext copy: readable without a key; the encrypted one refuses a wrong key
        return
    with pytest.raises(agentfs.WrongKey):
        agentfs.open(target, encryption=OLD)


def test_the_copy_of_a_synced_store_is_attached_to_no_remote(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.servers import make_file_spec

    spec = make_file_spec(tmp_path)
    remote_root = Path(urllib.parse.urlparse(spec.url).path)
    source, target = tmp_path / "source", tmp_path / "copy"
    with agentfs.open(source) as store:
        store.run("r").commit({"v": 1})
        Pusher(store.engine, PackRemote(spec.url, spec.storage_options)).push()
        assert store.engine.remote_state_names()  # the source holds a remote's sync state
    remote_keys = sorted(str(path.relative_to(remote_root)) for path in remote_root.rglob("*"))
    assert run(monkeypatch, source, "copy", "--encrypt", str(source), str(target), new=NEW) == 0
    with agentfs.open(target, encryption=NEW) as copy:
        assert copy.engine.remote_state_names() == []
        assert copy.stats().remotes == []
        assert copy.run("r").latest().state == {"v": 1}
    assert not (target / "remotes").exists() or not any((target / "remotes").iterdir())
    assert sorted(str(path.relative_to(remote_root)) for path in remote_root.rglob("*")) == remote_keys  # nothing pushed
    config = json.loads((target / "config").read_bytes())
    assert "remotes" not in config
