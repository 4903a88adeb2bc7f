"""AgentFSSaver's list channels: one msgpack call per list, and only the new items of a grown list encoded alone."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph.checkpoint.base")

from langchain_core.messages import AIMessage, HumanMessage
from langgraph.checkpoint.base import ChannelVersions, Checkpoint, empty_checkpoint
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

import agentfs
from agentfs.integrations.langgraph import AgentFSSaver, list_values

SERDE = JsonPlusSerializer()
ITEMS: list[Any] = [1, -7, 2.5, "s", "é" * 40, {"a": [1, 2]}, ("t", 1), [None, b"x"], HumanMessage("hi"), AIMessage("yo", id="m1")]


def test_a_packed_list_is_each_items_msgpack_back_to_back() -> None:
    packed = list_values.packed_list(SERDE, ITEMS)
    alone = [SERDE.dumps_typed(item) for item in ITEMS]
    assert packed is not None and packed == list_values.packed_items(alone)


class _Bytes(bytes):
    pass


@pytest.mark.parametrize("raw", [None, b"x", bytearray(b"y"), _Bytes(b"z"), object()])
def test_an_item_not_msgpack_alone_takes_the_item_by_item_path(raw: Any) -> None:
    assert list_values.packed_list(SERDE, [*ITEMS, raw]) is None
    assert list_values.packed_list(JsonPlusSerializer(pickle_fallback=True), [*ITEMS, raw]) is None


def _put(saver: AgentFSSaver, config: Any, step: int, messages: list[Any], version: int) -> Any:
    checkpoint: Checkpoint = {**empty_checkpoint(), "id": f"1f{step:06d}"}
    versions: ChannelVersions = {"messages": version}
    checkpoint["channel_values"] = {"messages": messages}
    checkpoint["channel_versions"] = versions
    return saver.put(config, checkpoint, {"step": step}, versions)


def test_a_grown_list_encodes_only_its_new_items_and_reads_back_as_in_memory_saver(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    saver = AgentFSSaver(agentfs.open(tmp_path / "s", durability="process"))
    memory = InMemorySaver()
    ours = theirs = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    messages: list[Any] = []
    encoded: list[Any] = []
    real = JsonPlusSerializer.dumps_typed
    monkeypatch.setattr(JsonPlusSerializer, "dumps_typed", lambda self, obj: encoded.append(obj) or real(self, obj))
    for step in range(1, 6):
        messages = [*messages, HumanMessage(f"question {step}"), AIMessage(f"answer {step}", id=f"a{step}")]
        encoded.clear()
        ours = _put(saver, ours, step, messages, step)
        theirs = _put(memory, theirs, step, messages, step)  # type: ignore[arg-type]
        alone = [obj for obj in encoded if not isinstance(obj, (list, dict))]
        assert len(alone) == (len(messages) if step == 1 else 2), f"step {step}: {len(alone)} items encoded alone"
    got, expected = AgentFSSaver(saver.store).get_tuple(ours), memory.get_tuple(theirs)
    assert got is not None and expected is not None
    assert got.checkpoint["channel_values"] == expected.checkpoint["channel_values"]
    assert got.checkpoint["channel_values"]["messages"] == messages
