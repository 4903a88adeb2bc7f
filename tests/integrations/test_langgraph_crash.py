"""A LangGraph process killed with SIGKILL mid-run resumes from its last completed step.

The graph counts to STEPS, one superstep per count. Each life is this file run as a script: it
prints the count of every checkpoint whose put returned, and is killed at a random moment. After
each kill the store must verify, hold every checkpoint reported, and every checkpoint must load
whole; the last life runs to the end, and the count must have advanced by exactly one a step.
"""

from __future__ import annotations

import operator
import random
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Annotated, Any, TypedDict

if __name__ != "__main__":
    import pytest

    pytest.importorskip("langgraph.graph")

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import ChannelVersions, Checkpoint, CheckpointMetadata
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph

import agentfs
from agentfs.integrations.langgraph import AgentFSSaver

STEPS = 120
THREAD: RunnableConfig = {"configurable": {"thread_id": "counting"}, "recursion_limit": STEPS + 10}


class Count(TypedDict):
    count: int
    log: Annotated[list[int], operator.add]


def _work(state: Count) -> dict[str, Any]:
    time.sleep(0.002)
    return {"count": state["count"] + 1, "log": [state["count"]]}


def counter(saver: AgentFSSaver) -> CompiledStateGraph[Any, Any, Any, Any]:
    builder = StateGraph(Count)
    builder.add_node("work", _work)
    builder.add_edge(START, "work")
    builder.add_conditional_edges("work", lambda state: "work" if state["count"] < STEPS else END)
    return builder.compile(checkpointer=saver)


def run_to_end(saver: AgentFSSaver) -> Any:
    graph = counter(saver)
    started = graph.get_state(THREAD).created_at is not None
    return graph.invoke(None if started else {"count": 0, "log": []}, THREAD)


class _Reporting(AgentFSSaver):
    def put(
        self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata, new_versions: ChannelVersions
    ) -> RunnableConfig:
        stored = super().put(config, checkpoint, metadata, new_versions)
        print(checkpoint["channel_values"].get("count", -1), flush=True)
        return stored


def _life(store: str) -> None:
    print("ready", flush=True)
    if sys.stdin.readline():
        run_to_end(_Reporting(store))
        print("finished", flush=True)


def _start(store: Path) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, __file__, str(store)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def _kill_mid_run(life: subprocess.Popen[str], rng: random.Random) -> list[int]:
    """Let the life report a few checkpoints, SIGKILL it at a random moment; the counts it reported."""
    assert life.stdin is not None and life.stdout is not None
    assert life.stdout.readline() == "ready\n"
    life.stdin.write("go\n")
    life.stdin.flush()
    reported = [int(life.stdout.readline()) for _ in range(rng.randint(5, 30))]
    time.sleep(rng.uniform(0, 0.01))
    life.send_signal(signal.SIGKILL)
    life.wait(timeout=30)
    return reported


def _check(store_path: Path, reported: int) -> int:
    with agentfs.open(store_path) as store:
        assert store.verify().ok, "a torn checkpoint after SIGKILL"
        saver = AgentFSSaver(store)
        history = list(saver.list(THREAD))
        for tup in history:  # every checkpoint loads whole and is a consistent state
            values = tup.checkpoint["channel_values"]
            assert values.get("log", []) == list(range(values.get("count", 0)))
        latest = history[0].checkpoint["channel_values"].get("count", -1) if history else -2
        assert latest >= reported, f"the last completed step reported {reported}, the store resumes from {latest}"
        return latest


def test_sigkill_mid_run_resumes_from_the_last_completed_step(tmp_path: Path) -> None:
    rng = random.Random(4)
    store = tmp_path / "store"
    life = _start(store)
    latest = -2  # before the first life: no checkpoint; its first put is the input's, with no count yet
    for kill in range(3):
        reported = _kill_mid_run(life, rng)
        assert reported == list(range(latest + 1, latest + 1 + len(reported))), f"resumed from {latest}: {reported}"
        life = _start(store) if kill < 2 else life  # the next life imports LangGraph while this one is checked
        latest = _check(store, reported[-1])
    assert latest < STEPS
    with agentfs.open(store) as opened:
        final = run_to_end(AgentFSSaver(opened))
        assert opened.verify().ok
    assert final == {"count": STEPS, "log": list(range(STEPS))}, "a step was lost or run twice"


if __name__ == "__main__":
    _life(sys.argv[1])
