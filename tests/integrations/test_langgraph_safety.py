"""Loading a checkpoint never imports a class its data names unless the serde allows it.

Values go through `self.serde` and nothing else decodes them, so LangGraph's allowlists decide;
agentfs's own records never import anything. Strict mode (LANGGRAPH_STRICT_MSGPACK=true, read
when LangGraph is imported) is checked in a fresh interpreter.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph.checkpoint.serde.jsonplus")

import ormsgpack
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

import agentfs
from agentfs.integrations.langgraph import AgentFSSaver

PROBE = "agentfs_langgraph_probe"
EXT_CONSTRUCTOR_KW_ARGS = 2  # langgraph.checkpoint.serde.jsonplus: module, class name, kwargs


def _forged() -> bytes:
    """msgpack naming PROBE.Boom, as LangGraph writes an object it rebuilds by importing its class."""
    return ormsgpack.packb(ormsgpack.Ext(EXT_CONSTRUCTOR_KW_ARGS, ormsgpack.packb([PROBE, "Boom", {"armed": True}])))


class Forger(JsonPlusSerializer):
    """Writes the string "FORGED" as data that names PROBE.Boom, and "PICKLED" as a pickle of it."""

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        if obj == "FORGED":
            return "msgpack", _forged()
        if obj == "PICKLED":
            return "pickle", b"c" + PROBE.encode() + b"\nBoom\n)R."
        return super().dumps_typed(obj)


def _probe_module(directory: Path) -> Path:
    """A module that leaves a file behind if it is ever imported."""
    marker = directory / "imported"
    (directory / f"{PROBE}.py").write_text(
        f"open({str(marker)!r}, 'w').close()\nclass Boom:\n    def __init__(self, **kw):\n        pass\n"
    )
    return marker


def _put_forged(store: agentfs.Store, thread: str, value: str) -> RunnableConfig:
    writer = AgentFSSaver(store, serde=Forger())
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"evil": value}
    checkpoint["channel_versions"] = {"evil": 1}
    config = writer.put(
        {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}, checkpoint, {"source": "loop", "step": 0}, {"evil": 1}
    )
    writer.put_writes(config, [("evil", value)], "task")
    return config


def test_a_class_outside_the_allowlist_is_never_imported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    marker = _probe_module(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    with agentfs.open(tmp_path / "store") as store:
        forged = _put_forged(store, "forged", "FORGED")
        pickled = _put_forged(store, "pickled", "PICKLED")
        reader = AgentFSSaver(store, serde=JsonPlusSerializer(allowed_msgpack_modules=[("datetime", "datetime")]))
        tup = reader.get_tuple(forged)
        assert tup is not None
        assert tup.checkpoint["channel_values"]["evil"] == {"armed": True}  # the data, not an object
        assert tup.pending_writes == [("task", "evil", {"armed": True})]
        assert [t.checkpoint["channel_values"] for t in reader.list({"configurable": {"thread_id": "forged"}})] == [
            {"evil": {"armed": True}}
        ]
        with pytest.raises(NotImplementedError, match="pickle"):
            reader.get_tuple(pickled)  # pickles are refused unless the serde was built with pickle_fallback
    assert not marker.exists() and PROBE not in sys.modules


def test_strict_mode_runs_a_graph_and_blocks_unknown_classes(tmp_path: Path) -> None:
    marker = _probe_module(tmp_path)
    script = textwrap.dedent(
        f"""
        import datetime, operator, sys, uuid
        from typing import Annotated, Any, TypedDict

        from langgraph.checkpoint.serde import _msgpack
        from langgraph.graph import START, StateGraph
        from langgraph.types import Command, interrupt

        import agentfs
        from agentfs.integrations.langgraph import AgentFSSaver
        from tests.integrations.test_langgraph_safety import PROBE, _put_forged

        assert _msgpack.STRICT_MSGPACK_ENABLED

        class State(TypedDict):
            when: datetime.datetime
            ids: Annotated[list[uuid.UUID], operator.add]
            tags: set[str]

        def ask(state: State) -> dict[str, Any]:
            answer = interrupt("tag?")
            return {{"ids": [uuid.UUID(int=2)], "tags": state["tags"] | {{answer}}}}

        builder = StateGraph(State)
        builder.add_node("ask", ask)
        builder.add_edge(START, "ask")
        store = agentfs.open({str(tmp_path / "store")!r})
        graph = builder.compile(checkpointer=AgentFSSaver(store))
        config: Any = {{"configurable": {{"thread_id": "strict"}}}}
        start = {{"when": datetime.datetime(2024, 5, 1, tzinfo=datetime.timezone.utc), "ids": [uuid.UUID(int=1)], "tags": {{"a"}}}}
        assert "__interrupt__" in graph.invoke(start, config)
        graph = builder.compile(checkpointer=AgentFSSaver(store))  # as a fresh process would
        final = graph.invoke(Command(resume="b"), config)
        assert final == {{**start, "ids": [uuid.UUID(int=1), uuid.UUID(int=2)], "tags": {{"a", "b"}}}}, final

        forged = _put_forged(store, "forged", "FORGED")
        tup = AgentFSSaver(store).get_tuple(forged)
        assert tup is not None and tup.checkpoint["channel_values"]["evil"] == {{"armed": True}}
        assert PROBE not in sys.modules
        print("ok")
        """
    )
    env = {**os.environ, "LANGGRAPH_STRICT_MSGPACK": "true", "PYTHONPATH": os.pathsep.join([str(tmp_path), str(Path(__file__).parents[2])])}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]
    assert not marker.exists()
