"""Two failures LangGraph's own suite found, each on a real graph, sync and async.

- A copy-fork (`update_state(config, None, as_node="__copy__")`) is saved under its source's parent
  with `new_versions={}`: its values must still come back, so running the fork does its work again.
- A thread written by a stock saver carries string channel versions ("<counter>.<random>"); it must
  go on running on AgentFSSaver, not fail in `get_next_version` on its next step.
"""

from __future__ import annotations

import asyncio
import contextlib
import operator
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest

pytest.importorskip("langgraph.graph")

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, ChannelVersions, Checkpoint, empty_checkpoint
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.graph import START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command, interrupt

import agentfs
from agentfs.integrations.langgraph import AgentFSSaver
from agentfs.integrations.langgraph_layout import Namespace


class State(TypedDict):
    value: Annotated[list[str], operator.add]


def _ask_human(state: State) -> dict[str, list[str]]:
    return {"value": [f"human:{interrupt('What is your input?')}"]}


def build(checkpointer: BaseCheckpointSaver[Any]) -> CompiledStateGraph[Any, Any, Any, Any]:
    return (
        StateGraph(State)
        .add_node("node_a", lambda state: {"value": ["a"]})
        .add_node("ask_human", _ask_human)
        .add_node("node_b", lambda state: {"value": ["b"]})
        .add_edge(START, "node_a")
        .add_edge("node_a", "ask_human")
        .add_edge("ask_human", "node_b")
        .compile(checkpointer=checkpointer)
    )


THREAD: RunnableConfig = {"configurable": {"thread_id": "1"}}


def _saver(tmp_path: Path) -> AgentFSSaver:
    return AgentFSSaver(agentfs.open(tmp_path / "store", durability="process"))


def copy_fork(saver: BaseCheckpointSaver[Any]) -> list[Any]:
    """Run to the end, fork the checkpoint before the interrupt by copy, run the fork: what each run returned."""
    graph = build(saver)
    graph.invoke({"value": []}, THREAD)
    graph.invoke(Command(resume="hello"), THREAD)
    before_ask = [snap for snap in graph.get_state_history(THREAD) if snap.next == ("ask_human",)][-1]
    fork = graph.update_state(before_ask.config, None, as_node="__copy__")
    state = graph.get_state(fork)
    asked = graph.invoke(None, fork)
    final = graph.invoke(Command(resume="new answer"), fork)
    return [state.values, state.next, [i.value for i in asked.get("__interrupt__", ())], final]


async def acopy_fork(saver: BaseCheckpointSaver[Any]) -> list[Any]:
    graph = build(saver)
    await graph.ainvoke({"value": []}, THREAD)
    await graph.ainvoke(Command(resume="hello"), THREAD)
    before_ask = [snap async for snap in graph.aget_state_history(THREAD) if snap.next == ("ask_human",)][-1]
    fork = await graph.aupdate_state(before_ask.config, None, as_node="__copy__")
    state = await graph.aget_state(fork)
    asked = await graph.ainvoke(None, fork)
    final = await graph.ainvoke(Command(resume="new answer"), fork)
    return [state.values, state.next, [i.value for i in asked.get("__interrupt__", ())], final]


EXPECTED_FORK = [{"value": ["a"]}, ("ask_human",), ["What is your input?"], {"value": ["a", "human:new answer", "b"]}]


def test_copy_fork_keeps_its_values_and_runs_again(tmp_path: Path) -> None:
    assert copy_fork(InMemorySaver()) == EXPECTED_FORK  # the reference behaves as this test says
    assert copy_fork(_saver(tmp_path)) == EXPECTED_FORK


def test_copy_fork_keeps_its_values_and_runs_again_async(tmp_path: Path) -> None:
    assert asyncio.run(acopy_fork(_saver(tmp_path))) == EXPECTED_FORK


def _checkpoint(checkpoint_id: str, values: dict[str, Any], versions: ChannelVersions) -> Checkpoint:
    checkpoint = empty_checkpoint()
    checkpoint.update(id=checkpoint_id, channel_values=values, channel_versions=versions)
    return checkpoint


def test_a_checkpoint_saved_under_an_older_parent_keeps_channels_the_parent_lacks(tmp_path: Path) -> None:
    saver = _saver(tmp_path)
    root: RunnableConfig = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    first = saver.put(root, _checkpoint("1", {"a": "a1", "b": "b1"}, {"a": 1, "b": 1}), {}, {"a": 1, "b": 1})
    saver.put(first, _checkpoint("2", {"a": "a2", "b": "b1"}, {"a": 2, "b": 1}), {}, {"a": 2})
    # a copy of checkpoint 2 saved under checkpoint 1, nothing new: "a" is at a version its parent does not hold
    fork = saver.put(first, _checkpoint("3", {"a": "a2", "b": "b1"}, {"a": 2, "b": 1}), {"source": "fork"}, {})
    for reader in (saver, AgentFSSaver(saver.store)):  # also from the store, not from what the saver remembers
        tup = reader.get_tuple(fork)
        assert tup is not None and tup.checkpoint["channel_values"] == {"a": "a2", "b": "b1"}
    held = saver.store.run(saver.layout.checkpoints(Namespace("t", "0", ""))).latest()
    assert held is not None and "v:a" in held.manifest.state and "v:b" not in held.manifest.state  # "b" is still shared


def _import_thread(source: BaseCheckpointSaver[Any], target: BaseCheckpointSaver[Any]) -> None:
    """Copy a thread checkpoint by checkpoint, as one saver's data moves to another (oldest first)."""
    for tup in reversed(list(source.list(THREAD))):
        by_task: dict[str, list[tuple[str, Any]]] = {}
        for task_id, channel, value in tup.pending_writes or []:
            by_task.setdefault(task_id, []).append((channel, value))
        for task_id, writes in by_task.items():
            target.put_writes(tup.config, writes, task_id)
        target.put(tup.parent_config or THREAD, tup.checkpoint, tup.metadata, tup.checkpoint["channel_versions"])


@pytest.mark.parametrize("stock", [InMemorySaver, SqliteSaver])
def test_a_thread_with_string_versions_from_a_stock_saver_goes_on(tmp_path: Path, stock: type[Any]) -> None:
    with contextlib.ExitStack() as stack:
        source = InMemorySaver() if stock is InMemorySaver else stack.enter_context(SqliteSaver.from_conn_string(":memory:"))
        _string_versions_go_on(source, _saver(tmp_path))


def _string_versions_go_on(source: BaseCheckpointSaver[Any], saver: AgentFSSaver) -> None:
    build(source).invoke({"value": []}, THREAD)  # stops at the interrupt
    imported = source.get_tuple(THREAD)
    assert imported is not None and all(isinstance(v, str) for v in imported.checkpoint["channel_versions"].values())
    _import_thread(source, saver)
    assert build(saver).invoke(Command(resume="yes"), THREAD) == build(source).invoke(Command(resume="yes"), THREAD)
    after = saver.get_tuple(THREAD)
    assert after is not None and after.checkpoint["channel_values"]["value"] == ["a", "human:yes", "b"]
    assert all(isinstance(v, str) for v in after.checkpoint["channel_versions"].values())  # the thread kept its form


def test_a_thread_with_string_versions_goes_on_async(tmp_path: Path) -> None:
    source = InMemorySaver()
    build(source).invoke({"value": []}, THREAD)
    saver = _saver(tmp_path)
    _import_thread(source, saver)

    async def resume() -> Any:
        return await build(saver).ainvoke(Command(resume="yes"), THREAD)

    assert asyncio.run(resume()) == {"value": ["a", "human:yes", "b"]}
