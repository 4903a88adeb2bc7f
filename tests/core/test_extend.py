"""agentfs.Extend: a commit that appends to its parent's list stores what a commit of the whole list stores."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

import agentfs
from agentfs.format import chunking
from agentfs.format.refs import TreeRef, parse_node
from tests.helpers.raw import corrupt_object


def _items(rng: random.Random, step: int) -> list[dict[str, object]]:
    return [{"step": step, "text": "w" * rng.randint(1, 3000), "raw": rng.randbytes(rng.randint(0, 300))} for _ in range(rng.randint(1, 5))]


def test_extend_stores_what_the_whole_list_stores(tmp_path: Path) -> None:
    """Ref for ref, chunk for chunk: the manifest's state is the one a commit of the whole list writes (from a
    list small enough to be packed, through chunk trees of several levels), and a fresh store reads the list."""
    rng = random.Random(21)
    extended, whole = agentfs.open(tmp_path / "extended").run("r"), agentfs.open(tmp_path / "whole").run("r")
    items: list[dict[str, object]] = []
    head = None
    for step in range(250):
        new = _items(rng, step)
        items += new
        mine = extended.commit({"items": agentfs.Extend(new), "step": step}, parent=head)
        theirs = whole.commit({"items": items, "step": step})
        assert mine.manifest.state == theirs.manifest.state, f"step {step}"
        head = mine.id
    assert isinstance(mine.manifest.state["items"].blob, TreeRef)  # a chunk tree
    latest = agentfs.open(tmp_path / "extended").run("r").latest()
    assert latest is not None and latest.state == {"items": items, "step": 249}


def test_extend_across_the_large_value_chunking(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A list that grows past LARGE_VALUE changes its chunk sizes: that commit is stored whole, the next extend again."""
    monkeypatch.setattr(chunking, "LARGE_VALUE", 200_000)
    rng = random.Random(5)
    extended, whole = agentfs.open(tmp_path / "extended").run("r"), agentfs.open(tmp_path / "whole").run("r")
    items: list[bytes] = []
    head = None
    for step in range(12):
        new = [rng.randbytes(30_000) for _ in range(2)]
        items += new
        mine = extended.commit({"items": agentfs.Extend(new)}, parent=head)
        assert mine.manifest.state == whole.commit({"items": items}).manifest.state, f"step {step}"
        head = mine.id
    assert mine.state["items"] == items


def test_extend_in_a_fresh_store_checks_the_chunks_it_keeps(tmp_path: Path) -> None:
    """A store opened afresh (no tree it committed itself) reads the parent's tree nodes and extends it alike."""
    rng = random.Random(8)
    run = agentfs.open(tmp_path / "s").run("r")
    items = [item for step in range(60) for item in _items(rng, step)]
    first = run.commit({"items": items})
    new = _items(rng, 60)
    again = agentfs.open(tmp_path / "s").run("r").commit({"items": agentfs.Extend(new)}, parent=first.id)
    whole = agentfs.open(tmp_path / "w").run("r").commit({"items": items + new})
    assert again.manifest.state == whole.manifest.state
    assert again.state["items"] == items + new


def test_extend_on_an_empty_run_and_a_missing_key(tmp_path: Path) -> None:
    run = agentfs.open(tmp_path).run("r")
    first = run.commit({"other": 1, "items": agentfs.Extend([1, 2])}, parent=None)
    second = run.commit({"items": agentfs.Extend([3]), "more": agentfs.Extend(["a"])}, parent=first.id)
    assert second.state == {"items": [1, 2, 3], "more": ["a"]}


def test_extend_needs_a_list_and_a_named_parent(tmp_path: Path) -> None:
    run = agentfs.open(tmp_path).run("r")
    first = run.commit({"items": "not a list"})
    with pytest.raises(agentfs.SerializationError, match=r"state\[\"items\"\] is an Extend: commit it with parent="):
        run.commit({"items": agentfs.Extend([1])})
    with pytest.raises(agentfs.SerializationError, match="Extend appends to a list"):
        run.commit({"items": agentfs.Extend([1])}, parent=first.id)
    with pytest.raises(agentfs.Conflict):
        run.commit({"items": agentfs.Extend([1])}, parent=None)
    assert run.head_id() == first.id


def test_an_encrypted_store_extends_as_it_stores_whole(tmp_path: Path) -> None:
    """Keyed ids: the extended list's refs are those of the whole list committed to another run of the same store."""
    rng = random.Random(13)
    with agentfs.open(tmp_path, encryption=agentfs.Encryption(passphrase="extend", scrypt_n=2**4)) as store:
        extended, whole = store.run("extended"), store.run("whole")
        items: list[dict[str, object]] = []
        head = None
        for step in range(60):
            new = _items(rng, step)
            items += new
            mine = extended.commit({"items": agentfs.Extend(new)}, parent=head)
            assert mine.manifest.state == whole.commit({"items": items}).manifest.state, f"step {step}"
            head = mine.id
    with agentfs.open(tmp_path, encryption=agentfs.Encryption(passphrase="extend", scrypt_n=2**4)) as store:
        latest = store.run("extended").latest()
        assert latest is not None and latest.state["items"] == items


def test_a_damaged_kept_chunk_is_refused_by_a_fresh_store(tmp_path: Path) -> None:
    """The extended list refers to its parent's chunks unread: a chunk damaged on disk still fails a fresh store's read."""
    rng = random.Random(3)
    run = agentfs.open(tmp_path).run("r")
    head = run.commit({"items": [item for step in range(40) for item in _items(rng, step)]}).id
    for step in range(40, 45):
        head = run.commit({"items": agentfs.Extend(_items(rng, step))}, parent=head).id
    checkpoint = agentfs.open(tmp_path).run("r").get(head)
    tree = checkpoint.manifest.state["items"].blob
    assert isinstance(tree, TreeRef)
    oid, depth = tree.oid, tree.depth
    for _level in range(depth):  # down the first children to the list's first chunk, a kept one since
        oid = parse_node(checkpoint._store.db.read(oid), oid, "test")[0][0]
    corrupt_object(tmp_path, oid)
    with pytest.raises(agentfs.IntegrityError):
        agentfs.open(tmp_path).run("r").get(head).value("items")
