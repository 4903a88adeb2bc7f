"""A whole list committed again with items appended is stored as an extension of the parent's list (HeldLists).

What it stores must be what a commit of the whole list stores, chunk for chunk: the oracle here is a store opened
afresh for each commit, which holds no list bytes and so cuts and hashes every list whole."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path

import pytest

import agentfs
from agentfs.engine.object_cache import HeldLists
from agentfs.format import chunking
from agentfs.format.refs import TreeRef


def _messages(rng: random.Random, count: int) -> list[dict[str, object]]:
    return [{"role": "user", "text": "m" * rng.randint(200, 2500), "raw": rng.randbytes(rng.randint(0, 200))} for _ in range(count)]


@pytest.fixture
def bytes_cut(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The size of each byte string the commits cut into chunks (chunking.cut_bytes), in order."""
    cut: list[int] = []
    original = chunking.cut_bytes

    def recording(params: chunking.ChunkParams, data: bytes | memoryview) -> Iterator[memoryview]:
        cut.append(len(data))
        return original(params, data)

    monkeypatch.setattr(chunking, "cut_bytes", recording)
    return cut


def test_a_growing_list_is_stored_as_a_whole_commit_stores_it_cutting_only_its_tail(tmp_path: Path, bytes_cut: list[int]) -> None:
    """Each commit of the grown list writes the refs a fresh store writes for the whole list, and cuts no more than
    the new items and the parent's last chunks (under a chunk's greatest size): not the whole list.

    Planted (Run._value_ref without grown_ref): the bytes cut equal the whole list's at every commit, and it fails."""
    rng = random.Random(4)
    store = agentfs.open(tmp_path / "grown")
    run = store.run("r")
    messages = _messages(rng, 30)
    run.commit({"messages": list(messages), "step": 0})
    for step in range(1, 40):
        new = _messages(rng, rng.randint(1, 3))
        messages += new
        bytes_cut.clear()
        mine = run.commit({"messages": list(messages), "step": step})
        grown_cut = sum(bytes_cut)
        with agentfs.open(tmp_path / "oracle") as oracle:  # nothing held: the whole list cut and hashed
            theirs = oracle.run(f"r{step}").commit({"messages": list(messages), "step": step})
        assert mine.manifest.state == theirs.manifest.state, f"step {step}"
        whole = mine.manifest.state["messages"].blob.size
        assert grown_cut < chunking.SMALL.max_size + sum(len(str(item)) + 64 for item in new) < whole, f"step {step}"
    assert isinstance(mine.manifest.state["messages"].blob, TreeRef)
    store.close()
    latest = agentfs.open(tmp_path / "grown").run("r").latest()
    assert latest is not None and latest.state == {"messages": messages, "step": 39}


def test_a_list_changed_before_its_end_is_stored_whole(tmp_path: Path) -> None:
    """An item edited, removed or inserted before the end: the bytes are not the parent's followed by new ones, and
    the commit stores the list whole; what it stores reads back as committed, and is what a fresh store writes."""
    rng = random.Random(9)
    run = agentfs.open(tmp_path / "s").run("r")
    messages = _messages(rng, 40)
    run.commit({"messages": list(messages)})
    changes = [
        lambda items: items.__setitem__(3, {"role": "tool", "text": "edited"}),
        lambda items: items.pop(10),
        lambda items: items.insert(0, {"role": "system", "text": "first"}),
        lambda items: items.__setitem__(-1, {"role": "user", "text": "last changed"}),
        lambda items: items.extend(_messages(rng, 2)),
        lambda items: items.__delitem__(slice(-3, None)),
    ]
    for number, change in enumerate(changes):
        change(messages)
        mine = run.commit({"messages": list(messages)})
        with agentfs.open(tmp_path / "oracle") as oracle:
            assert mine.manifest.state == oracle.run(f"o{number}").commit({"messages": list(messages)}).manifest.state
        assert agentfs.open(tmp_path / "s").run("r").latest().state == {"messages": messages}


def test_a_head_moved_by_another_store_is_not_extended_from_the_held_bytes(tmp_path: Path) -> None:
    """The bytes held are those of this process's last commit of the key. Another writer then commits a list of the
    same size that the new list does not begin with: the next commit of the held list with items appended must not
    extend the head's list as if it were the held one (it is another blob) and stores the whole list.

    Planted (grown_ref without its check of the head's blob id against the held one): the commit stores the other
    writer's list with the new items appended, and the comparison with a fresh store fails."""
    rng = random.Random(2)
    first, second = agentfs.open(tmp_path), agentfs.open(tmp_path)
    messages = _messages(rng, 30)
    first.run("r").commit({"messages": list(messages)})
    other = [dict(item) for item in messages]
    other[5]["text"] = "M" * len(str(other[5]["text"]))  # the same size, other bytes
    moved = second.run("r").commit({"messages": other})
    grown = messages + _messages(rng, 2)
    mine = first.run("r").commit({"messages": list(grown)}, parent=moved.id)  # on the other writer's head
    with agentfs.open(tmp_path / "oracle") as oracle:
        assert mine.manifest.state == oracle.run("o").commit({"messages": list(grown)}).manifest.state
    assert agentfs.open(tmp_path).run("r").latest().state == {"messages": grown}


def test_an_encrypted_store_grows_a_list_as_it_stores_it_whole(tmp_path: Path) -> None:
    rng = random.Random(6)
    encryption = agentfs.Encryption(passphrase="grown", scrypt_n=2**4)
    messages = _messages(rng, 30)
    with agentfs.open(tmp_path, encryption=encryption) as store:
        for _step in range(12):
            messages += _messages(rng, 2)
            mine = store.run("r").commit({"messages": list(messages)})
    with agentfs.open(tmp_path, encryption=encryption) as fresh:  # nothing held: the whole list cut and hashed
        assert fresh.run("o").commit({"messages": list(messages)}).manifest.state == mine.manifest.state
        latest = fresh.run("r").latest()
        assert latest is not None and latest.state == {"messages": messages}


def test_held_lists_keep_the_latest_per_key_within_their_bytes() -> None:
    held = HeldLists(capacity=100)
    held.add("r", "a", b"1", b"x" * 40)
    held.add("r", "a", b"2", b"y" * 50)  # replaces the key's bytes, counted once
    held.add("r", "b", b"3", b"z" * 40)
    assert held.get("r", "a") == (b"2", b"y" * 50) and held.get("r", "b") == (b"3", b"z" * 40)
    held.add("s", "a", b"4", b"w" * 30)  # 120 bytes: the least recently committed goes
    assert held.get("r", "a") is None and held.get("s", "a") is not None
    held.add("s", "b", b"5", b"v" * 101)  # larger than all: not held
    assert held.get("s", "b") is None
