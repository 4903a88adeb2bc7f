"""AgentFSSaver against LangGraph's own conformance suite, plus what the suite does not look at.

The suite (langgraph-checkpoint-conformance) calls only the async methods; every capability it
knows, required and optional, must be detected and pass. Without LangGraph these tests are skipped;
with it, a missing conformance package is an error, not a skip.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph.checkpoint.base")

from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import ChannelVersions, Checkpoint, empty_checkpoint
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import ALL_CAPABILITIES
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer

import agentfs
from agentfs.format.keys import RETIRED_RECORDS
from agentfs.integrations.langgraph import AgentFSSaver, records
from agentfs.integrations.langgraph_layout import Layout, Namespace, Parsed, decode, encode, hashed
from agentfs.names import check_name
from tests.helpers import raw


def test_conformance_suite_passes_every_capability(tmp_path: Path) -> None:
    stores: list[agentfs.Store] = []

    @checkpointer_test(name="AgentFSSaver")
    async def factory() -> AsyncIterator[AgentFSSaver]:
        store = agentfs.open(tmp_path / f"store-{len(stores)}", durability="process")
        stores.append(store)
        yield AgentFSSaver(store)
        store.close()

    report = asyncio.run(validate(factory))
    report.print_report()
    results = report.results
    assert {name for name, result in results.items() if result.detected} == {cap.value for cap in ALL_CAPABILITIES}
    failures = {name: result.failures for name, result in results.items() if result.passed is not True}
    assert not failures, failures
    counts = {name: result.tests_passed for name, result in results.items()}
    print("conformance tests passed per capability:", counts, "total", sum(counts.values()))
    assert all(count > 0 for count in counts.values())
    for store in stores:
        assert store.verify().ok


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_any_string_encodes_to_valid_segments_and_back(text: str) -> None:
    encoded = encode(text)
    check_name(encoded)
    segments = encoded.split("/")
    assert decode(segments, 0) == (None if hashed(encoded) else text, len(segments))
    assert len(encoded) <= 250


def test_run_names_parse_back_and_other_runs_do_not() -> None:
    layout = Layout("apps/lg")
    where = Namespace("thread/with spaces:é|ü" * 4, "0", "outer:1f0a|inner:1f0b")
    name = layout.checkpoints(where)
    assert layout.parse_checkpoints(name) == Parsed(where.thread, "0", where.ns)
    long = Namespace("t" * 300, "0", "ns")
    assert layout.parse_checkpoints(layout.checkpoints(long)) == Parsed(None, "0", "ns")
    for other in (layout.control(where.thread), layout.writes(where, "1f0c"), layout.by_run("r"), "apps/lg/x/g0/s/cp", "lg/s/g0/s/cp"):
        assert layout.parse_checkpoints(other) is None


def _checkpoint(checkpoint_id: str, values: dict[str, Any], versions: ChannelVersions) -> Checkpoint:
    cp = empty_checkpoint()
    cp["id"] = checkpoint_id
    cp["channel_values"] = values
    cp["channel_versions"] = versions
    return cp


def _config(thread: str, checkpoint_id: str | None = None, ns: str = "") -> RunnableConfig:
    configurable = {"thread_id": thread, "checkpoint_ns": ns}
    if checkpoint_id is not None:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}


def test_only_changed_channels_are_stored_and_lookups_do_not_scan(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    saver = AgentFSSaver(agentfs.open(tmp_path / "s", durability="process"))
    big = {"notes": "x" * 20_000}
    parent = None
    for step in range(200):
        values = {"big": big, "log": [f"line {i}" for i in range(step + 1)]}
        new: ChannelVersions = {"big": 1, "log": step + 1} if step == 0 else {"log": step + 1}
        cp = _checkpoint(f"1f0{step:05d}", values, {"big": 1, "log": step + 1})
        parent = saver.put(_config("t", parent), cp, {"source": "loop", "step": step}, new)["configurable"]["checkpoint_id"]
    run = saver.store.run(saver.layout.checkpoints(Namespace("t", "0", "")))
    ids = run.ids()
    assert sum("v:big" in run.get(i).manifest.state for i in ids) == 1  # written once, referenced after
    full_copies = sum("l:log" in run.get(i).manifest.state for i in ids)
    assert full_copies == math.ceil(len(ids) / records.SNAPSHOT_EVERY)  # the other versions are deltas
    bound = math.ceil(math.log2(len(ids))) + 2 + records.SNAPSHOT_EVERY  # a binary search, then one delta chain

    reads: list[str] = []
    real_get = agentfs.Run.get

    def counting_get(self: agentfs.Run, checkpoint_id: str) -> agentfs.Checkpoint:
        reads.append(checkpoint_id)
        return real_get(self, checkpoint_id)

    monkeypatch.setattr(agentfs.Run, "get", counting_get)
    saver = AgentFSSaver(saver.store)  # nothing remembered from the puts
    tup = saver.get_tuple(_config("t", "1f000042"))
    assert tup is not None and tup.checkpoint["channel_values"]["log"] == [f"line {i}" for i in range(43)]
    assert tup.checkpoint["channel_values"]["big"] == big
    assert len(set(reads)) <= bound, f"get_tuple by id read {len(set(reads))} of {len(ids)} checkpoints"

    reads.clear()
    listed = list(saver.list(_config("t"), before=_config("t", "1f000100"), limit=3))
    assert [t.checkpoint["id"] for t in listed] == ["1f000099", "1f000098", "1f000097"]
    assert len(set(reads)) <= bound + 2, f"list(before, limit=3) read {len(set(reads))} of {len(ids)} checkpoints"
    assert saver.get_tuple(_config("t", "1f000042x")) is None


def test_lists_of_any_items_round_trip_as_in_memory_saver(tmp_path: Path) -> None:
    saver = AgentFSSaver(agentfs.open(tmp_path / "s", durability="process"))
    values = {"mixed": [None, b"x", bytearray(b"y"), 1, "s", {"a": [1, 2]}, ("t", 1)], "empty": [], "many": list(range(70_000))}
    versions: ChannelVersions = {key: 1 for key in values}
    config = saver.put(_config("t"), _checkpoint("1", values, versions), {}, versions)
    tup = AgentFSSaver(saver.store).get_tuple(config)
    memory = InMemorySaver()
    expected = memory.get_tuple(memory.put(_config("t"), _checkpoint("1", values, versions), {}, versions))
    assert tup is not None and expected is not None
    assert tup.checkpoint["channel_values"] == expected.checkpoint["channel_values"]


class _XorCipher:
    """A stand-in for AES: a fresh random nonce per call, so the same plaintext never encrypts the same way twice."""

    def encrypt(self, plaintext: bytes) -> tuple[str, bytes]:
        nonce = os.urandom(16)
        return "xor", nonce + bytes(byte ^ nonce[i % 16] for i, byte in enumerate(plaintext))

    def decrypt(self, ciphername: str, ciphertext: bytes) -> bytes:
        nonce, body = ciphertext[:16], ciphertext[16:]
        return bytes(byte ^ nonce[i % 16] for i, byte in enumerate(body))


def test_encrypted_serializer_keeps_values_secret_and_storage_linear(tmp_path: Path) -> None:
    saver = AgentFSSaver(agentfs.open(tmp_path / "s", durability="process"), serde=EncryptedSerializer(_XorCipher()))
    messages: list[dict[str, str]] = []
    parent = None
    for step in range(150):
        messages.append({"id": f"m{step}", "text": f"confidential step {step} " + "lorem ipsum " * 40})
        values = {"messages": list(messages), "step": step}
        cp = _checkpoint(f"1f0{step:05d}", values, {"messages": step + 1, "step": step + 1})
        config = saver.put(_config("t", parent), cp, {"step": step}, {"messages": step + 1, "step": step + 1})
        parent = config["configurable"]["checkpoint_id"]
    for reader in (saver, AgentFSSaver(saver.store, serde=EncryptedSerializer(_XorCipher()))):
        tup = reader.get_tuple(_config("t"))
        assert tup is not None and tup.checkpoint["channel_values"] == {"messages": messages, "step": 149}
    assert not any(b"confidential" in data for data in raw.stored(saver.store).values())
    final = sum(len(json.dumps(message)) for message in messages)
    stored = raw.stored_size(saver.store)
    assert stored < 10 * final, f"{stored / final:.1f}x: unchanged items were encrypted and stored again"


def test_out_of_order_and_repeated_ids_keep_latest_the_greatest(tmp_path: Path) -> None:
    saver = AgentFSSaver(agentfs.open(tmp_path / "s", durability="process"))
    for checkpoint_id, value in (("b", 1), ("c", 2), ("a", 3), ("c", 4)):
        saver.put(_config("t"), _checkpoint(checkpoint_id, {"v": value}, {"v": value}), {"step": value}, {"v": value})
    listed = [(t.checkpoint["id"], t.checkpoint["channel_values"]["v"]) for t in saver.list(_config("t"))]
    assert listed == [("c", 4), ("b", 1), ("a", 3)]
    latest = saver.get_tuple(_config("t"))
    assert latest is not None and latest.checkpoint["id"] == "c"
    assert saver.store.verify().ok


def test_long_thread_ids_and_namespaces_are_hashed_and_listed(tmp_path: Path) -> None:
    saver = AgentFSSaver(agentfs.open(tmp_path / "s", durability="process"))
    thread, ns = "thread:" + "é" * 200, "|".join(f"node{i}:1f0{i:033d}" for i in range(12))
    saver.put(_config(thread, ns=ns), _checkpoint("1", {"v": 1}, {"v": 1}), {}, {"v": 1})
    assert all(len(name) <= 1024 for name in saver.store.runs())
    listed = [t.config["configurable"] for t in saver.list(None)]
    assert listed == [{"thread_id": thread, "checkpoint_ns": ns, "checkpoint_id": "1"}]
    saver.copy_thread(thread, "short")
    assert [t.checkpoint["id"] for t in saver.list({"configurable": {"thread_id": "short"}})] == ["1"]


def _snapshot(saver: AgentFSSaver, thread: str) -> list[tuple[Any, ...]]:
    return [
        (t.checkpoint["id"], t.checkpoint["channel_values"], t.metadata, t.pending_writes, (t.parent_config or {}).get("configurable"))
        for t in saver.list(_config(thread))
    ]


def test_copies_and_prunes_keep_every_value_of_what_remains(tmp_path: Path) -> None:
    saver = AgentFSSaver(agentfs.open(tmp_path / "s", durability="process"))
    big = {"notes": "y" * 20_000}
    parent = None
    for step in range(40):
        values = {"big": big, "log": [f"line {i}" for i in range(step + 1)], "step": step}
        new: ChannelVersions = {"log": step + 1, "step": step + 1, **({"big": 1} if step == 0 else {})}
        cp = _checkpoint(f"1f0{step:05d}", values, {"big": 1, "log": step + 1, "step": step + 1})
        config = saver.put(_config("src", parent), cp, {"step": step, "run_id": f"run-{step // 10}"}, new)
        saver.put_writes(config, [("log", [f"line {step + 1}"])], f"task-{step}")
        parent = config["configurable"]["checkpoint_id"]
    original = _snapshot(saver, "src")
    assert len(original) == 40 and original[0][1]["log"] == [f"line {i}" for i in range(40)]

    def in_dst(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
        return [(*row[:4], {**row[4], "thread_id": "dst"} if row[4] else None) for row in rows]

    saver.copy_thread("src", "dst")
    assert _snapshot(saver, "dst") == in_dst(original)
    saver.delete_for_runs(["run-1", "run-3"])  # from both threads: the copies keep their run_id
    kept = [row for row in original if row[2]["run_id"] in ("run-0", "run-2")]
    assert _snapshot(saver, "src") == kept
    assert _snapshot(saver, "dst") == in_dst(kept)
    saver.prune(["src"], strategy="keep_latest")
    assert _snapshot(saver, "src") == kept[:1]
    assert _snapshot(saver, "dst") == in_dst(kept)
    assert saver.store.verify().ok


def test_deleted_thread_starts_afresh_and_its_old_generation_is_reclaimed(tmp_path: Path) -> None:
    with AgentFSSaver(tmp_path / "s", durability="process") as saver:
        saver.put(_config("t"), _checkpoint("1", {"v": "old"}, {"v": 1}), {}, {"v": 1})
        saver.put_writes(_config("t", "1"), [("v", "pending")], "task")
        saver.delete_thread("t")
        assert saver.get_tuple(_config("t")) is None
        saver.put(_config("t"), _checkpoint("2", {"v": "new"}, {"v": 1}), {}, {"v": 1})
        tup = saver.get_tuple(_config("t"))
        assert tup is not None and tup.checkpoint["channel_values"] == {"v": "new"} and tup.pending_writes == []
        assert [t.checkpoint["id"] for t in saver.list(None)] == ["2"]
        old = saver.store.run(saver.layout.checkpoints(Namespace("t", "0", "")))
        assert old.ids() == [] and raw.record_ids(saver.store, old.name, RETIRED_RECORDS) != []  # deleted through retention
        assert saver.store.verify().ok
    with pytest.raises(ValueError, match="durability"):
        AgentFSSaver(saver.store, durability="process")


def test_pending_writes_come_back_in_writes_sort_key_order(tmp_path: Path) -> None:
    saver = AgentFSSaver(agentfs.open(tmp_path / "s", durability="process"))
    config = saver.put(_config("t"), _checkpoint("1", {}, {}), {}, {})
    saver.put_writes(config, [("c", 3), ("d", 4)], "task-b", "~path-2")
    saver.put_writes(config, [("a", 1)], "task-z", "")
    saver.put_writes(config, [("b", 2), ("__error__", "boom")], "task-a", "~path-2")
    saver.put_writes(config, [("b", 20), ("__error__", "boom again")], "task-a", "~path-2")
    tup = saver.get_tuple(config)
    assert tup is not None
    assert tup.pending_writes == [
        ("task-z", "a", 1),
        ("task-a", "__error__", "boom again"),
        ("task-a", "b", 2),
        ("task-b", "c", 3),
        ("task-b", "d", 4),
    ]


def test_retired_generations_are_reclaimed_after_a_grace_and_gc_frees_their_bytes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from agentfs.integrations.langgraph import generations

    with AgentFSSaver(tmp_path / "s", durability="process") as saver:
        for i in range(1, 6):
            saver.put(_config("t"), _checkpoint(str(i), {"v": os.urandom(30_000).hex()}, {"v": i}), {}, {"v": i})
        saver.prune(["t"])  # keep_latest: a new generation holding checkpoint 5
        first = saver.store.run(saver.layout.checkpoints(Namespace("t", "0", "")))
        assert len(first.ids()) == 5, "reclaimed before its grace: a reader that resolved it a moment ago would fail"
        monkeypatch.setattr(generations, "RECLAIM_AFTER", 0.0)
        saver.prune(["t"])  # the next switch reclaims what is past its grace
        assert first.ids() == []
        before = raw.stored_object_size(tmp_path / "s")
        saver.store.gc(grace=0)
        assert raw.stored_object_size(tmp_path / "s") < before / 3
        tup = saver.get_tuple(_config("t"))
        assert tup is not None and tup.checkpoint["id"] == "5"
        assert saver.store.verify().ok
        control = saver.store.run(saver.layout.control("t"))
        assert len(control.ids()) == 1  # every generation it named is gone: only the pointer is kept
