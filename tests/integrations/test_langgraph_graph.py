"""Real LangGraph graphs on AgentFSSaver: same answers and history as InMemorySaver, sync and async,
resumed on another store from a remote, and the growing conversation's storage.

The graph fans out to three nodes, one of which interrupts (so the other two's writes wait as
pending writes), then runs a subgraph that runs a subgraph that interrupts (namespace
`outer:<id>|inner:<id>`), and finishes.
"""

from __future__ import annotations

import asyncio
import importlib.util
import operator
import os
import random
import sys
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest

pytest.importorskip("langgraph.graph")

import msgpack
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command, Interrupt, StateSnapshot, interrupt

import agentfs
from agentfs.integrations.langgraph import AgentFSSaver
from tests.helpers import raw


class State(TypedDict):
    log: Annotated[list[str], operator.add]


def _ask(state: State) -> dict[str, list[str]]:
    return {"log": [f"ask:{interrupt({'question': 'approve?', 'seen': len(state['log'])})}"]}


def _confirm(state: State) -> dict[str, list[str]]:
    return {"log": [f"confirm:{interrupt('confirm?')}"]}


def build(checkpointer: BaseCheckpointSaver[Any]) -> CompiledStateGraph[Any, Any, Any, Any]:
    inner = StateGraph(State)
    inner.add_node("confirm", _confirm)
    inner.add_edge(START, "confirm")
    outer = StateGraph(State)
    outer.add_node("prep", lambda state: {"log": ["prep"]})
    outer.add_node("inner", inner.compile())
    outer.add_edge(START, "prep")
    outer.add_edge("prep", "inner")
    graph = StateGraph(State)
    graph.add_node("a", lambda state: {"log": ["a"]})
    graph.add_node("b", lambda state: {"log": ["b"]})
    graph.add_node("ask", _ask)
    graph.add_node("outer", outer.compile())
    graph.add_node("done", lambda state: {"log": ["done"]})
    for node in ("a", "b", "ask"):
        graph.add_edge(START, node)
    graph.add_edge(["a", "b", "ask"], "outer")
    graph.add_edge("outer", "done")
    return graph.compile(checkpointer=checkpointer)


def _plain(value: Any) -> Any:
    """Results and state without what differs between runs (interrupt and checkpoint ids)."""
    if isinstance(value, Interrupt):
        return ["interrupt", _plain(value.value)]
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    return value


def _snapshot(snap: StateSnapshot) -> dict[str, Any]:
    return {
        "values": _plain(snap.values),
        "next": list(snap.next),
        "step": snap.metadata.get("step") if snap.metadata else None,
        "source": snap.metadata.get("source") if snap.metadata else None,
        "has_parent": snap.parent_config is not None,
        "interrupts": _plain(list(snap.interrupts)),
        "tasks": [
            [
                task.name,
                _plain(list(task.interrupts)),
                _plain(task.result),
                _snapshot(task.state) if isinstance(task.state, StateSnapshot) else None,
            ]
            for task in snap.tasks
        ],
    }


def _namespaces(saver: BaseCheckpointSaver[Any], thread: str) -> list[str]:
    """Every namespace with checkpoints in `thread`, task ids dropped: `outer|inner` for `outer:<id>|inner:<id>`."""
    spaces = {tup.config["configurable"]["checkpoint_ns"] for tup in saver.list({"configurable": {"thread_id": thread}})}
    return sorted("|".join(part.split(":")[0] for part in ns.split("|")) for ns in spaces)


def scenario(saver: BaseCheckpointSaver[Any], thread: str) -> dict[str, Any]:
    graph = build(saver)
    config: Any = {"configurable": {"thread_id": thread}}
    first = graph.invoke({"log": ["start"]}, config)
    second = graph.invoke(Command(resume="yes"), config)
    nested = graph.get_state(config, subgraphs=True)
    third = graph.invoke(Command(resume="ok"), config)
    return {
        "results": _plain([first, second, third]),
        "nested": _snapshot(nested),
        "history": [_snapshot(snap) for snap in graph.get_state_history(config)],
        "namespaces": _namespaces(saver, thread),
    }


async def ascenario(saver: BaseCheckpointSaver[Any], thread: str) -> dict[str, Any]:
    graph = build(saver)
    config: Any = {"configurable": {"thread_id": thread}}
    first = await graph.ainvoke({"log": ["start"]}, config)
    second = await graph.ainvoke(Command(resume="yes"), config)
    nested = await graph.aget_state(config, subgraphs=True)
    third = await graph.ainvoke(Command(resume="ok"), config)
    return {
        "results": _plain([first, second, third]),
        "nested": _snapshot(nested),
        "history": [_snapshot(snap) async for snap in graph.aget_state_history(config)],
        "namespaces": _namespaces(saver, thread),
    }


def test_interrupts_and_nested_subgraphs_match_in_memory_saver(tmp_path: Path) -> None:
    expected = scenario(InMemorySaver(), "t")
    assert expected["results"][2]["log"][-1] == "done"
    assert "outer|inner" in expected["namespaces"]
    with agentfs.open(tmp_path / "store") as store:
        saver = AgentFSSaver(store)
        assert scenario(saver, "thread one") == expected
        assert asyncio.run(ascenario(saver, "thread two")) == asyncio.run(ascenario(InMemorySaver(), "t"))
        assert asyncio.run(ascenario(saver, "thread two/again")) == expected
        assert store.verify().ok


def test_resume_on_another_store_from_a_remote(tmp_path: Path) -> None:
    url = (tmp_path / "remote").as_uri()
    config: Any = {"configurable": {"thread_id": "moving"}}
    with agentfs.open(tmp_path / "here") as here, here.sync(url) as daemon:
        graph = build(AgentFSSaver(here))
        graph.invoke({"log": ["start"]}, config)
        graph.invoke(Command(resume="yes"), config)
        assert daemon.flush(timeout=60)
    with agentfs.open(tmp_path / "there", remote=url) as there:
        graph = build(AgentFSSaver(there))
        assert graph.get_state(config).next == ("outer",)
        result = graph.invoke(Command(resume="ok"), config)
        history = [_snapshot(snap) for snap in graph.get_state_history(config)]
        assert there.verify().ok
    expected = scenario(InMemorySaver(), "t")
    assert _plain(result) == expected["results"][2]
    assert history == expected["history"]


STEPS = int(os.environ.get("AGENTFS_LANGGRAPH_STEPS", "1000"))


def _vocabulary(rng: random.Random) -> list[str]:
    words: set[str] = set()
    while len(words) < 1000:
        words.add("".join(rng.choice("etaoinshrdlcumwfgypbvkjxqz") for _ in range(rng.randint(2, 10))))
    return sorted(words)


def _message(rng: random.Random, words: list[str], i: int) -> dict[str, str]:
    out: list[str] = []
    while sum(len(word) + 1 for word in out) < 500:
        out.append(rng.choice(words))
    return {"role": "user" if i % 2 == 0 else "assistant", "id": f"msg-{i:05d}", "text": " ".join(out).capitalize() + "."}


class Conversation(TypedDict):
    messages: Annotated[list[dict[str, str]], operator.add]
    scratch: dict[str, str]
    step: int


def test_growing_conversation_through_a_graph_stays_under_10x_its_final_state(tmp_path: Path) -> None:
    """The conversation of the core storage test, one message a step, each step a LangGraph superstep."""
    rng = random.Random(5)
    words = _vocabulary(rng)
    scratch = {f"slot_{k:03d}": " ".join(rng.choice(words) for _ in range(14)) for k in range(100)}

    def talk(state: Conversation) -> dict[str, Any]:
        return {"messages": [_message(rng, words, state["step"])], "step": state["step"] + 1}

    builder = StateGraph(Conversation)
    builder.add_node("talk", talk)
    builder.add_edge(START, "talk")
    builder.add_conditional_edges("talk", lambda state: "talk" if state["step"] < STEPS else END)
    with agentfs.open(tmp_path / "store", durability="process") as store:
        saver = AgentFSSaver(store)
        config: Any = {"configurable": {"thread_id": "chat"}, "recursion_limit": STEPS + 10}
        final = builder.compile(checkpointer=saver).invoke({"messages": [], "scratch": scratch, "step": 0}, config)
        assert len(final["messages"]) == STEPS
        final_size = len(msgpack.packb(final))
        stored = raw.stored_size(store)
        print(f"{STEPS} steps: final state {final_size} B, objects/ + runs/ {stored} B: {stored / final_size:.2f}x")
        assert stored < 10 * final_size, f"{stored / final_size:.1f}x the final state"
        latest = saver.get_tuple(config)
        assert latest is not None and latest.checkpoint["channel_values"] == final
        assert store.verify().ok


def test_the_example_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    spec = importlib.util.spec_from_file_location("langgraph_agent", Path(__file__).parents[2] / "examples" / "langgraph_agent.py")
    assert spec is not None and spec.loader is not None
    example = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, example)  # LangGraph reads the state's annotations through it
    spec.loader.exec_module(example)
    example.main(tmp_path, (tmp_path / "remote").as_uri())
    out = capsys.readouterr().out
    assert "verdict 'approved from machine B'" in out and out.count("resumed and finished") == 2
