"""Dedup: storage grows with what changed, measured on the raw files of the store.

A conversation that grows by one message a step must cost about its own size, not a copy per step;
an unchanged 50 MB artifact must cost nothing but a log entry; a one-byte edit only its chunk.
"""

from __future__ import annotations

import hashlib
import random
from pathlib import Path
from typing import Any

import msgpack

import agentfs
from tests.helpers import raw

STEPS = 1000
MB = 1 << 20


def _files(store: agentfs.Store) -> dict[str, int]:
    """Every stored object and record with its size: what the store costs."""
    return {name: len(data) for name, data in raw.stored(store).items()}


def _vocabulary(rng: random.Random) -> list[str]:
    words: set[str] = set()
    while len(words) < 1000:
        words.add("".join(rng.choice("etaoinshrdlcumwfgypbvkjxqz") for _ in range(rng.randint(2, 10))))
    return sorted(words)


def _message(rng: random.Random, words: list[str], i: int) -> dict[str, Any]:
    out: list[str] = []
    length = 0
    while length < 500:
        out.append(rng.choice(words))
        length += len(out[-1]) + 1
    text = " ".join(out).capitalize() + "."
    return {"role": "user" if i % 2 == 0 else "assistant", "id": f"msg-{i:05d}", "text": text}


def test_growing_conversation_costs_linear_storage(tmp_path: Path) -> None:
    rng = random.Random(5)
    words = _vocabulary(rng)
    scratch = {f"slot_{k:03d}": " ".join(rng.choice(words) for _ in range(14)) for k in range(100)}
    assert 9_000 <= len(msgpack.packb(scratch)) <= 12_000
    messages: list[dict[str, Any]] = []
    sizes_at: dict[int, int] = {}
    with agentfs.open(tmp_path / ".agentfs", durability="process") as store:
        run = store.run("chat")
        state: dict[str, Any] = {}
        for i in range(STEPS):
            messages.append(_message(rng, words, i))
            state = {"step": i, "messages": messages, "scratch": scratch}
            run.commit(state)
            if i + 1 in (STEPS // 2, STEPS):
                sizes_at[i + 1] = sum(_files(store).values())
        final_size = len(msgpack.packb(state))
        stored = sizes_at[STEPS]
        print(f"final state {final_size} B, objects/ + runs/ {stored} B: {stored / final_size:.2f}x")
        assert stored < 10 * final_size, f"{stored} bytes stored for a {final_size}-byte final state ({stored / final_size:.1f}x)"
        # linear, not quadratic: the second 500 steps cost about what the first 500 did (quadratic: 3x)
        first_half = sizes_at[STEPS // 2]
        assert stored - first_half < 1.6 * first_half
        assert len(run.ids()) == STEPS
        latest = run.latest()
        assert latest is not None and latest.state == state
        assert run.get(run.ids()[STEPS // 2]).state["messages"] == messages[: STEPS // 2 + 1]
        assert store.verify().ok


def test_unchanged_and_one_byte_edited_50mb_artifact(tmp_path: Path) -> None:
    data = bytearray(random.Random(50).randbytes(50 * MB))  # incompressible
    with agentfs.open(tmp_path / ".agentfs") as store:
        run = store.run("files")
        first = run.commit({"step": 0}, artifacts={"data.bin": bytes(data)})
        files_first = _files(store)
        assert sum(files_first.values()) >= 50 * MB  # random bytes do not compress

        second = run.commit({"step": 1}, artifacts={"data.bin": bytes(data)})
        files_second = _files(store)
        added = sum(files_second.values()) - sum(files_first.values())
        assert added < 4096, f"committing an unchanged 50 MB artifact again added {added} bytes"
        new_files = sorted(set(files_second) - set(files_first))
        assert new_files == [f"record files {raw.LOG_RECORDS} {second.id}"], new_files  # one log entry, no object at all
        assert second.artifacts["data.bin"].ref == first.artifacts["data.bin"].ref

        path = tmp_path / "edited.bin"
        data[len(data) // 2] ^= 0xFF
        path.write_bytes(data)
        third = run.commit({"step": 2}, artifacts={"data.bin": path})
        files_third = _files(store)
        added = sum(files_third.values()) - sum(files_second.values())
        assert 0 < added < MB, f"a one-byte edit of a 50 MB artifact added {added} bytes"
        assert all(files_third[name] == size for name, size in files_second.items()), "an existing file changed"
        new_objects = [n for n in set(files_third) - set(files_second) if n.startswith("object ")]
        assert 1 <= len(new_objects) <= 8, new_objects  # the edited chunk and the tree nodes above it

        expected = hashlib.sha256(data).digest()
        with third.artifacts["data.bin"].open() as stream:
            digest = hashlib.sha256()
            while block := stream.read(MB):
                digest.update(block)
        assert digest.digest() == expected
        assert hashlib.sha256(first.artifacts["data.bin"].read_bytes()).digest() != expected
        assert store.verify().ok
