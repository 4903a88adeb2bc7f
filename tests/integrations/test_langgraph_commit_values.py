"""AgentFSSaver's cache of small decoded state values: read once per commit, large values never kept, what it
just wrote not read back, and what it remembers the same as what is read."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("langgraph.checkpoint.base")

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import WRITES_IDX_MAP, empty_checkpoint

import agentfs
from agentfs.core.checkpoint import Checkpoint
from agentfs.integrations.langgraph import AgentFSSaver, records


def test_small_values_are_decoded_once_and_large_ones_each_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = agentfs.open(tmp_path / "s", durability="process")
    big = bytes(range(256)) * 4096  # 1 MiB: chunked into a tree, not packed into the entry
    commit = store.run("r").commit({"small": ["msgpack", b"x" * 100], "tiny": 1, "big": big})
    decoded: list[str] = []
    real = Checkpoint.value
    monkeypatch.setattr(Checkpoint, "value", lambda self, key: decoded.append(key) or real(self, key))
    read = records.CommitValues()
    for _ in range(3):
        again = store.run("r").get(commit.id)  # a new object for the same commit, as each saver read makes
        assert read(again, "small") == ["msgpack", b"x" * 100] and read(again, "tiny") == 1 and read(again, "big") == big
    assert sorted(decoded) == ["big", "big", "big", "small", "tiny"]


ERROR = "__error__"  # a special write: its index is negative, a later one replaces it
assert ERROR in WRITES_IDX_MAP


def _saved_with_writes(saver: AgentFSSaver, value: bytearray) -> RunnableConfig:
    config = saver.put({"configurable": {"thread_id": "t", "checkpoint_ns": ""}}, empty_checkpoint(), {"step": -1}, {})
    saver.put_writes(config, [("raw", value), ("blob", b"\x00\xff"), ("none", None), ("nested", {"a": [1, [2, 3]]})], "task-1")
    saver.put_writes(config, [(ERROR, "boom")], "task-2", "path")
    return config


def test_what_a_saver_remembers_of_its_writes_is_what_a_fresh_saver_reads(tmp_path: Path) -> None:
    store = agentfs.open(tmp_path / "s", durability="process")
    value = bytearray(b"caller's")
    writer = AgentFSSaver(store)
    config = _saved_with_writes(writer, value)
    value[:] = b"changed!"  # the caller's object changes after put_writes returned: what was saved does not
    remembered = writer.get_tuple(config)
    read = AgentFSSaver(store).get_tuple(config)  # no cache: decoded from the store
    assert remembered is not None and read is not None
    assert remembered == read
    assert [(task, channel, type(got), got) for task, channel, got in read.pending_writes] == [
        ("task-1", "raw", bytearray, bytearray(b"caller's")),
        ("task-1", "blob", bytes, b"\x00\xff"),
        ("task-1", "none", type(None), None),
        ("task-1", "nested", dict, {"a": [1, [2, 3]]}),
        ("task-2", ERROR, str, "boom"),
    ]
    assert list(writer.list(None)) == list(AgentFSSaver(store).list(None))


def test_a_saver_does_not_read_back_the_records_it_just_wrote(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = agentfs.open(tmp_path / "s", durability="process")
    saver = AgentFSSaver(store)
    config = _saved_with_writes(saver, bytearray(b"x"))
    decoded: list[str] = []
    real = Checkpoint.value
    monkeypatch.setattr(Checkpoint, "value", lambda self, key: decoded.append(key) or real(self, key))
    assert saver.get_tuple(config) is not None and len(list(saver.list(None))) == 1
    assert decoded == []  # checkpoint, metadata, channel locations and both write batches came from the saver's memory
    assert AgentFSSaver(store).get_tuple(config) is not None
    assert {"checkpoint", "metadata", "blobs", ""} <= set(decoded)  # a fresh saver reads them (a write batch: its one value, "")


def test_the_writes_of_many_tasks_read_no_commit_back_and_another_saver_between_them_is_seen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = agentfs.open(tmp_path / "s", durability="process")
    saver, other = AgentFSSaver(store), AgentFSSaver(store)
    config = saver.put({"configurable": {"thread_id": "t", "checkpoint_ns": ""}}, empty_checkpoint(), {"step": -1}, {})
    read: list[str] = []
    real = agentfs.Run.get
    monkeypatch.setattr(agentfs.Run, "get", lambda self, commit_id: read.append(commit_id) or real(self, commit_id))
    for task in range(6):  # without the heads it appended, the k-th task's put_writes reads k commits to find its checkpoint
        saver.put_writes(config, [("out", task)], f"task-{task}")
    assert read == []
    other.put_writes(config, [("out", 6)], "task-6")  # the head moves under the first saver: it reads the new head
    read.clear()
    saver.put_writes(config, [("out", 7)], "task-7")
    assert read
    got = AgentFSSaver(store).get_tuple(config)
    assert got is not None and [(task, value) for task, _channel, value in got.pending_writes] == [(f"task-{i}", i) for i in range(8)]
