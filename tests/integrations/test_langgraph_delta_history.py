"""get_delta_channel_history: the answers of InMemorySaver's, on a real graph whose messages are a
DeltaChannel (only snapshots in checkpoints, the rest replayed from ancestors' writes), without a
get_tuple per ancestor."""

from __future__ import annotations

import asyncio
import operator
from functools import reduce
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest

pytest.importorskip("langgraph.channels.delta")

from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph

from agentfs.integrations.langgraph import AgentFSSaver

TURNS = 9


def _concat(state: list[str], writes: list[list[str]]) -> list[str]:
    return reduce(operator.add, writes, state)


class State(TypedDict):
    messages: Annotated[list[str], DeltaChannel(_concat, snapshot_frequency=4)]
    turns: int


def _reply(state: State) -> dict[str, Any]:
    return {"messages": [f"reply to {state['messages'][-1]}"], "turns": state.get("turns", 0) + 1}


def _review(state: State) -> dict[str, Any]:
    return {"messages": [f"reviewed {len(state['messages'])}"]}


def _run(saver: BaseCheckpointSaver[Any]) -> list[Any]:
    """Every checkpoint's config (newest first) after TURNS invocations, each checked against the messages it must hold."""
    graph = StateGraph(State).add_node("reply", _reply).add_node("review", _review)
    app = graph.add_edge(START, "reply").add_edge("reply", "review").add_edge("review", END).compile(checkpointer=saver)
    config = {"configurable": {"thread_id": "delta"}}
    for turn in range(TURNS):
        app.invoke({"messages": [f"user {turn}"]}, config)
    messages = app.get_state(config).values["messages"]
    assert len(messages) == 3 * TURNS and messages[-3:] == [f"user {TURNS - 1}", f"reply to user {TURNS - 1}", f"reviewed {3 * TURNS - 1}"]
    return [t.config for t in saver.list(config)]


def _plain(history: Any) -> dict[str, Any]:
    """A history without task ids (each saver's run makes its own)."""
    return {
        channel: {"writes": [(write[1], write[2]) for write in entry["writes"]], "seed": entry.get("seed", "<no seed>")}
        for channel, entry in history.items()
    }


def test_delta_channel_history_matches_in_memory_saver_without_get_tuple(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    reference = InMemorySaver()
    with AgentFSSaver(tmp_path / "s", durability="process") as saver:
        ours, theirs = _run(saver), _run(reference)
        assert len(ours) == len(theirs) > 3 * TURNS

        def no_get_tuple(*_args: Any) -> None:
            raise AssertionError("get_delta_channel_history called get_tuple")

        monkeypatch.setattr(saver, "get_tuple", no_get_tuple)
        channels = ["messages", "turns", "absent"]
        seeded = 0
        for mine, reference_config in zip(ours, theirs, strict=True):
            expected = _plain(reference.get_delta_channel_history(config=reference_config, channels=channels))
            assert _plain(saver.get_delta_channel_history(config=mine, channels=channels)) == expected
            assert _plain(asyncio.run(saver.aget_delta_channel_history(config=mine, channels=channels))) == expected
            seeded += expected["messages"]["seed"] != "<no seed>" and bool(expected["messages"]["writes"])
        assert seeded > 0  # some answers join a snapshot and the writes after it
        assert saver.get_delta_channel_history(config=ours[0], channels=[]) == {}
