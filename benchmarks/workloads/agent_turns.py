"""Workload 18: two agent-shaped workloads, as a user of each framework would run them, next to the
framework's stock SQLite option in the same run (issue 21).

LangGraph: a tool-calling graph (`agent` -> `tools` -> `agent`, LangGraph's own ToolNode and
tools_condition) whose model is scripted: a user message gets a tool call, a tool result gets an
answer; one turn is one `invoke` (4 checkpoints, 3 task write batches). The same turns go to a graph
on AgentFSSaver (default durability: fsync) and one on SqliteSaver (WAL, synchronous=FULL), in
lockstep, the one going first alternating each turn. Figures: `invoke` median; `put_writes` median
(every call LangGraph made); at the end `graph.get_state` from a fresh saver object on the same files
(the store or connection opened and the saver made inside the clock; the graph compiled outside it),
5 rounds alternated, median.

OpenAI Agents: a session of N turns of the same 4 items each (user message, function call, function
call output, assistant message, ~1.4 KB), `add_items` per turn on AgentFSSession (fsync) and the
SDK's `SQLiteSession` on a file, in lockstep alternated; the median over the turns around 400 items
(turns 50-149) and over the last 200 turns (4,000 items at 1,000 turns): flat means the two agree.
"""

from __future__ import annotations

import asyncio
import json
import random
import sqlite3
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..context import Context
from .common import agentfs_part, at_most, fig, heap_frozen, in_turn

W = "18 agent turns"
WORDS = [
    *("agent", "tool", "state", "store", "resume", "fork", "turn", "model"),
    *("answer", "question", "result", "file", "remote", "sync", "journal", "commit"),
]
THREAD = {"configurable": {"thread_id": "bench-agent"}}
FRESH_ROUNDS = 5
EARLY = range(50, 150)  # the OpenAI turns whose medians stand for "around 400 items"


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


def _turn_texts(turn: int) -> tuple[str, str, str]:
    rng = random.Random(turn)
    return _text(rng, 30), _text(rng, 60), _text(rng, 60)


# LangGraph


def build_graph(saver: Any) -> Any:
    from langchain_core.messages import AIMessage, ToolMessage
    from langchain_core.tools import tool
    from langgraph.graph import START, MessagesState, StateGraph
    from langgraph.prebuilt import ToolNode, tools_condition

    @tool
    def search(query: str) -> str:
        """Search the notes."""
        return _turn_texts(len(query))[1]

    def agent(state: MessagesState) -> dict[str, Any]:
        """The scripted model: a question gets a tool call, a tool result gets an answer."""
        last = state["messages"][-1]
        turn = sum(1 for m in state["messages"] if m.type == "human")
        if isinstance(last, ToolMessage):
            return {"messages": [AIMessage(content=_turn_texts(turn)[2])]}
        call = {"name": "search", "args": {"query": str(last.content)[:60]}, "id": f"call-{turn}"}
        return {"messages": [AIMessage(content="", tool_calls=[call])]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode([search]))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)  # to "tools", or to the end
    graph.add_edge("tools", "agent")
    return graph.compile(checkpointer=saver)


class _TimedWrites:
    """Times every put_writes call of the saver it wraps (the graph calls it as its checkpointer)."""

    def __init__(self, saver: Any) -> None:
        self.ms: list[float] = []
        original = saver.put_writes

        def put_writes(*args: Any, **kwargs: Any) -> Any:
            t = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                self.ms.append((time.perf_counter() - t) * 1000)

        saver.put_writes = put_writes


class _LangGraphSide:
    def __init__(self, name: str, root: Path, make: Callable[[Path], tuple[Any, Callable[[], None]]]) -> None:
        self.name = name
        self.root = root
        self.make = make
        self.saver, self.close = make(root)
        self.writes = _TimedWrites(self.saver)
        self.graph = build_graph(self.saver)
        self.invoke_ms: list[float] = []

    def turn(self, turn: int) -> None:
        from langchain_core.messages import HumanMessage

        t = time.perf_counter()
        out = self.graph.invoke({"messages": [HumanMessage(_turn_texts(turn)[0])]}, THREAD)
        self.invoke_ms.append((time.perf_counter() - t) * 1000)
        assert len(out["messages"]) == 4 * (turn + 1), f"{self.name}: turn {turn} left {len(out['messages'])} messages"

    def fresh_get_state(self, turns: int) -> float:
        """ms of a fresh saver on the same files (opened inside the clock) answering graph.get_state."""
        t = time.perf_counter()
        saver, close = self.make(self.root)
        made = time.perf_counter() - t
        graph = build_graph(saver)
        t = time.perf_counter()
        snapshot = graph.get_state(THREAD)
        ms = (made + time.perf_counter() - t) * 1000
        close()
        assert len(snapshot.values["messages"]) == 4 * turns, f"{self.name}: fresh get_state is not the last turn"
        return ms


def _agentfs_saver(ctx: Context) -> Callable[[Path], tuple[Any, Callable[[], None]]]:
    def make(root: Path) -> tuple[Any, Callable[[], None]]:
        from agentfs.integrations.langgraph import AgentFSSaver

        af = ctx.agentfs
        assert af is not None
        store = af.open(root)
        return AgentFSSaver(store), store.close

    return make


def _sqlite_saver(root: Path) -> tuple[Any, Callable[[], None]]:
    from langgraph.checkpoint.sqlite import SqliteSaver

    conn = sqlite3.connect(root / "checkpoints.sqlite", check_same_thread=False)
    saver = SqliteSaver(conn)
    saver.setup()
    return saver, conn.close


def langgraph_part(ctx: Context) -> None:
    turns = ctx.sizes.agent_langgraph_turns
    sides = [_LangGraphSide("SqliteSaver", ctx.new_dir("w18-sqlite"), _sqlite_saver)]
    ours = agentfs_part(ctx, W, "AgentFSSaver", lambda: _LangGraphSide("AgentFSSaver", ctx.new_dir("w18-agentfs"), _agentfs_saver(ctx)))
    if ours is not None:
        sides.append(ours)
    fresh: dict[str, list[float]] = {side.name: [] for side in sides}
    with heap_frozen():  # as common.lockstep
        for turn in range(turns):
            for side in in_turn(turn, sides):
                side.turn(turn)
        for round_ in range(FRESH_ROUNDS):
            for side in in_turn(round_, sides):
                fresh[side.name].append(side.fresh_get_state(turns))
    for side in sides:
        side.close()
    peer = sides[0]
    mine = sides[1] if ours is not None else None

    def med(values: list[float] | None) -> float | None:
        return None if values is None else statistics.median(values)

    label = "LangGraph SqliteSaver"
    at_most(
        ctx,
        W,
        f"LangGraph: graph.get_state from a fresh saver (ms), {turns} turns",
        med(fresh.get("AgentFSSaver")),
        label,
        med(fresh["SqliteSaver"]),
        1.0,
        f"median of {FRESH_ROUNDS}, open inside the clock",
    )
    turn_ms = med(mine.invoke_ms if mine else None)
    at_most(ctx, W, "LangGraph: one turn (invoke, 4 checkpoints) median (ms)", turn_ms, label, med(peer.invoke_ms), 1.0)
    at_most(ctx, W, "LangGraph: put_writes median (ms)", med(mine.writes.ms if mine else None), label, med(peer.writes.ms), 1.0)


# OpenAI Agents


def openai_items(turn: int) -> list[dict[str, Any]]:
    question, result, answer = _turn_texts(turn)
    call = f"call-{turn}"
    return [
        {"role": "user", "content": question},
        {"type": "function_call", "call_id": call, "name": "search", "arguments": json.dumps({"query": question[:60]})},
        {"type": "function_call_output", "call_id": call, "output": result},
        {"role": "assistant", "content": answer},
    ]


async def _openai_lockstep(sessions: dict[str, Any], turns: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {name: [] for name in sessions}
    with heap_frozen():  # as common.lockstep
        for turn in range(turns):
            items = openai_items(turn)
            for name in in_turn(turn, list(sessions)):
                t = time.perf_counter()
                await sessions[name].add_items(items)
                times[name].append((time.perf_counter() - t) * 1000)
    for name, session in sessions.items():
        got = await session.get_items()
        assert len(got) == 4 * turns, f"{name}: {len(got)} items after {turns} turns"
    return times


def openai_part(ctx: Context) -> None:
    from agents.memory import SQLiteSession

    turns = ctx.sizes.agent_openai_turns
    sessions: dict[str, Any] = {"SQLiteSession": SQLiteSession("bench", ctx.new_dir("w18-openai-sqlite") / "session.db")}

    def ours() -> Any:
        from agentfs.integrations.openai_agents import AgentFSSession

        return AgentFSSession("bench", ctx.new_dir("w18-openai-agentfs"))

    mine = agentfs_part(ctx, W, "AgentFSSession", ours)
    if mine is not None:
        sessions["AgentFSSession"] = mine
    try:
        times = asyncio.run(_openai_lockstep(sessions, turns))
    finally:
        for session in sessions.values():
            session.close()
    late = range(max(EARLY.stop, turns - 200), turns)  # (--quick: fewer, after the early ones)
    label = "OpenAI SQLiteSession"

    def window(name: str, turns_in: range) -> float | None:
        values = times.get(name)
        return None if values is None else statistics.median(values[turns_in.start : turns_in.stop])

    early = range(EARLY.start, min(EARLY.stop, turns))
    at_most(
        ctx,
        W,
        f"OpenAI: add_items median, turns {early.start}-{early.stop - 1} (~{4 * (early.start + early.stop) // 2} items) (ms)",
        window("AgentFSSession", early),
        label,
        window("SQLiteSession", early),
        1.0,
    )
    at_most(
        ctx,
        W,
        f"OpenAI: add_items median, last {len(late)} of {turns} turns (~{4 * turns} items) (ms)",
        window("AgentFSSession", late),
        label,
        window("SQLiteSession", late),
        1.0,
    )
    early_ours, late_ours = window("AgentFSSession", early), window("AgentFSSession", late)
    flat = None if early_ours is None or late_ours is None else late_ours / early_ours
    fig(
        ctx,
        W,
        f"OpenAI: add_items at ~{4 * turns} items / at ~{4 * (early.start + early.stop) // 2} (x), AgentFSSession",
        flat,
        "goal",
        1.5,
        "<= 1.5x (flat)",
        lambda v: v <= 1.5,
    )


def run(ctx: Context) -> None:
    for part, needs in ((langgraph_part, "langgraph.prebuilt"), (openai_part, "agents.memory")):
        try:
            __import__(needs)
        except ImportError as exc:
            ctx.report.note(f"{W}: {needs} not installed ({exc}); its rows are empty")
            continue
        part(ctx)
