"""A fresh AgentFSSaver reading a list channel stored as a chain of deltas (records.py: d: records, a whole l: copy
every SNAPSHOT_EVERY versions): the same list at every checkpoint, one list packed for the read, and a damaged
chain refused by name."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph.checkpoint.base")

from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import ChannelVersions, Checkpoint, empty_checkpoint
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

import agentfs
from agentfs.core.run import Run
from agentfs.errors import FormatError
from agentfs.integrations.langgraph import AgentFSSaver, list_values, records
from agentfs.integrations.langgraph_layout import INITIAL_GENERATION, Namespace

THREAD: RunnableConfig = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
STEPS = 2 * records.SNAPSHOT_EVERY + 3  # two whole copies, then a chain of deltas on the last


def _message(step: int) -> Any:
    return HumanMessage(f"question {step}") if step % 2 else AIMessage(f"answer {step}", id=f"a{step}")


def _fill(saver: AgentFSSaver) -> tuple[list[str], list[list[Any]]]:
    """Puts STEPS checkpoints whose messages grow by one each; (their ids, their messages)."""
    config = THREAD
    ids: list[str] = []
    lists: list[list[Any]] = []
    messages: list[Any] = []
    for step in range(STEPS):
        messages = [*messages, _message(step)]
        checkpoint: Checkpoint = {**empty_checkpoint(), "id": f"1f{step:06d}"}
        versions: ChannelVersions = {"messages": step + 1}
        checkpoint["channel_values"] = {"messages": messages}
        checkpoint["channel_versions"] = versions
        config = saver.put(config, checkpoint, {"step": step}, versions)
        ids.append(checkpoint["id"])
        lists.append(messages)
    return ids, lists


def _run(saver: AgentFSSaver) -> Run:
    return saver.generations.checkpoints(Namespace("t", INITIAL_GENERATION, ""))


def _at(checkpoint_id: str) -> RunnableConfig:
    return {"configurable": {**THREAD["configurable"], "checkpoint_id": checkpoint_id}}


@pytest.mark.parametrize("encrypted", [False, True])
def test_a_fresh_saver_reads_every_list_of_a_chain_as_it_was_put(tmp_path: Path, encrypted: bool) -> None:
    serde = EncryptedSerializer.from_pycryptodome_aes(key=b"k" * 16) if encrypted else None
    store = agentfs.open(tmp_path / "s", durability="process")
    ids, lists = _fill(AgentFSSaver(store, serde=serde))
    head = _run(AgentFSSaver(store)).head_id() or ""
    assert _run(AgentFSSaver(store)).get(head).has_value(records.DELTA + "messages")  # the head's list is a delta
    newest_first = [tup.checkpoint["channel_values"]["messages"] for tup in AgentFSSaver(store, serde=serde).list(THREAD)]
    assert newest_first == lists[::-1]
    for checkpoint_id, messages in zip(ids, lists, strict=True):  # each from a fresh saver: from its own chain's top
        tup = AgentFSSaver(store, serde=serde).get_tuple(_at(checkpoint_id))
        assert tup is not None and tup.checkpoint["channel_values"]["messages"] == messages
    store.close()


def test_a_fresh_saver_packs_only_the_list_it_loads(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = agentfs.open(tmp_path / "s", durability="process")
    _ids, lists = _fill(AgentFSSaver(store))
    packed: list[int] = []
    real = list_values.packed_items
    monkeypatch.setattr(list_values, "packed_items", lambda items: packed.append(len(items)) or real(items))
    tup = AgentFSSaver(store).get_tuple(THREAD)
    assert tup is not None and tup.checkpoint["channel_values"]["messages"] == lists[-1]
    assert packed == [len(lists[-1])], f"packed lists of {packed} items along the chain"
    store.close()


def _damaged_head(saver: AgentFSSaver, record: Any) -> tuple[Run, str]:
    """A checkpoint after the head whose messages are `record`, a d: record; (its run, its commit id)."""
    run = _run(saver)
    head = run.get(run.head_id() or "")
    state = {**head.state, records.DELTA + "messages": record}
    state["blobs"] = {**state["blobs"], "messages": [STEPS + 1, None]}
    later = empty_checkpoint()
    commit = run.commit(state, metadata={**head.metadata, "checkpoint_id": later["id"], "parent_checkpoint_id": records.ids(head)[0]})
    return run, commit.id


def _item(text: str) -> list[Any]:
    return list(JsonPlusSerializer().dumps_typed(text))


@pytest.mark.parametrize(
    ("damage", "refusal"),
    [
        (lambda base: [base, STEPS - 1, 1, [_item("x")]], "a delta extends 34 items of a list that has 35"),
        (lambda base: [base, str(STEPS), 1, [_item("x")]], "malformed list record"),
        (lambda base: [base, STEPS, 1], "malformed list record"),
        (lambda base: ["not an id", STEPS, 1, [_item("x")]], "a list delta's base 'not an id' is not a commit id"),
        (lambda base: [base, STEPS, 1, [["msgpack", "not bytes"]]], "not a serialized value"),
    ],
)
def test_a_damaged_delta_is_refused_naming_its_commit(tmp_path: Path, damage: Any, refusal: str) -> None:
    store = agentfs.open(tmp_path / "s", durability="process")
    saver = AgentFSSaver(store)
    _fill(saver)
    run, damaged = _damaged_head(saver, damage(_run(saver).head_id()))
    with pytest.raises(FormatError, match=f"{run.name}@{damaged} channel 'messages': {refusal}"):
        AgentFSSaver(store).get_tuple(THREAD)
    store.close()


def test_a_delta_on_a_commit_without_the_list_is_refused(tmp_path: Path) -> None:
    store = agentfs.open(tmp_path / "s", durability="process")
    saver = AgentFSSaver(store)
    saver.put(THREAD, {**empty_checkpoint(), "channel_values": {"step": 1}, "channel_versions": {"step": 1}}, {}, {"step": 1})
    base = _run(saver).head_id() or ""
    run, _damaged = _damaged_head(saver, [base, 0, 1, [_item("x")]])
    with pytest.raises(FormatError, match=f"{run.name}@{base}: a list delta's base holds no list for channel 'messages'"):
        AgentFSSaver(store).get_tuple(THREAD)
    store.close()


def test_a_chain_of_deltas_past_its_bound_is_refused(tmp_path: Path) -> None:
    store = agentfs.open(tmp_path / "s", durability="process")
    saver = AgentFSSaver(store)
    _fill(saver)  # its head: 2 deltas on a whole copy
    bound = 4 * records.SNAPSHOT_EVERY
    count = STEPS
    for more in range(bound):  # each a delta of the one before: a chain longer than any the saver writes
        _damaged_head(saver, [_run(saver).head_id(), count, 1, [_item(f"m{count}")]])
        count += 1
        if more == bound - 3:  # `bound` deltas in all: read
            tup = AgentFSSaver(store).get_tuple(THREAD)
            assert tup is not None and len(tup.checkpoint["channel_values"]["messages"]) == count
    with pytest.raises(FormatError, match=f"{_run(saver).name}@.*: chain of list deltas is too long"):
        AgentFSSaver(store).get_tuple(THREAD)
    store.close()


@pytest.mark.parametrize(
    "raw",
    [
        [["msgpack", b"a"], ["str", b"b"]],  # as the saver writes: the pass in C
        [["msgpack", b"a"], ["bytearray", bytearray(b"b")]],  # agentfs gives a bytearray back as one: item by item
        [("msgpack", b"a"), ["str", b"b"]],
        [],
    ],
)
def test_typed_items_are_what_typed_makes_of_each(raw: list[Any]) -> None:
    items = records.typed_items(raw, "here")
    assert items == [records.typed(item, "here") for item in raw]
    assert all(type(item) is tuple and type(item[1]) is bytes for item in items)  # compared with dumps_typed's tuples
