"""Workload 14: what persisting one agent turn costs with agentfs next to each framework's own durable
option, and the bytes on disk after N turns (issue 20).

A turn is the same four messages in each framework's own types: the user's question, the model's
tool call, the tool's result, the model's answer (~1.4 KB of text). Only the persistence calls are
timed (no model runs): Pydantic AI's `AgentFSMessageHistory.append(new messages)` next to the JSON
file of `all_messages()` users write themselves (written whole each turn: a temporary file, fsync,
rename); Google ADK's `AgentFSSessionService.append_event` next to its `DatabaseSessionService` on
SQLite (aiosqlite), four events a turn; Strands' AgentFSSessionRepository next to its FileSessionManager, four
messages and one agent update a turn, measured by benchmarks/strands.py in the Strands venv (.venv-strands, made by
`make test-strands`: strands-agents pins mcp<2.2, which cannot be installed beside mcp>=2.3). Sizes are the apparent
size of every file each keeps.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import subprocess
import time
from pathlib import Path
from typing import Any

from ..context import Context
from ..peers import tree_size
from ..store_bytes import store_bytes
from .common import REPO, agentfs_part, at_most, fig

W = "16 framework sessions"
STRANDS_PYTHON = REPO / ".venv-strands" / "bin" / "python"
WORDS = [
    *("agent", "tool", "state", "store", "resume", "fork", "turn", "model"),
    *("answer", "question", "result", "file", "remote", "sync", "journal", "commit"),
]


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


def _turn_texts(turn: int) -> tuple[str, str, str]:
    rng = random.Random(turn)
    return _text(rng, 30), _text(rng, 60), _text(rng, 60)


def pydantic_turn(turn: int) -> list[Any]:
    from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart, UserPromptPart

    question, result, answer = _turn_texts(turn)
    call = f"call-{turn}"
    return [
        ModelRequest(parts=[UserPromptPart(question)]),
        ModelResponse(parts=[ToolCallPart("search", {"query": question[:60]}, tool_call_id=call)]),
        ModelRequest(parts=[ToolReturnPart("search", result, tool_call_id=call)]),
        ModelResponse(parts=[TextPart(answer)]),
    ]


def pydantic_ours(ctx: Context, turns: list[list[Any]]) -> tuple[float, int]:
    from agentfs.integrations.pydantic_ai import AgentFSMessageHistory

    path = ctx.new_dir("w14-pydantic-agentfs")
    with AgentFSMessageHistory("bench", path) as history:
        start = time.perf_counter()
        for messages in turns:
            history.append(messages)
        total = time.perf_counter() - start
        assert len(history.messages()) == 4 * len(turns)
    return total, tree_size(path)


def pydantic_json_file(ctx: Context, turns: list[list[Any]]) -> tuple[float, int]:
    from pydantic_ai.messages import ModelMessagesTypeAdapter

    path = ctx.new_dir("w14-pydantic-json")
    file, scratch = path / "history.json", path / "history.json.tmp"
    history: list[Any] = []
    start = time.perf_counter()
    for messages in turns:
        history += messages
        with scratch.open("wb") as out:
            out.write(ModelMessagesTypeAdapter.dump_json(history))
            out.flush()
            os.fsync(out.fileno())
        os.replace(scratch, file)
    total = time.perf_counter() - start
    return total, tree_size(path)


def adk_events(turn: int) -> list[Any]:
    from google.adk.events import Event, EventActions
    from google.genai import types

    question, result, answer = _turn_texts(turn)
    invocation, call = f"inv-{turn}", f"call-{turn}"

    def event(author: str, part: types.Part, **actions: Any) -> Event:
        role = "user" if author == "user" else "model"
        content = types.Content(role=role, parts=[part])
        return Event(author=author, invocation_id=invocation, content=content, actions=EventActions(**actions))

    return [
        event("user", types.Part(text=question)),
        event("agent", types.Part(function_call=types.FunctionCall(id=call, name="search", args={"query": question[:60]}))),
        event("agent", types.Part(function_response=types.FunctionResponse(id=call, name="search", response={"result": result}))),
        event("agent", types.Part(text=answer), state_delta={"turns": turn + 1}),
    ]


async def _append_all(service: Any, turns: int) -> float:
    session = await service.create_session(app_name="bench", user_id="u", session_id="s")
    events = [adk_events(turn) for turn in range(turns)]  # built before timing: Event() stamps its own time
    start = time.perf_counter()
    for turn_events in events:
        for event in turn_events:
            event.timestamp = time.time()
            await service.append_event(session, event)
    total = time.perf_counter() - start
    stored = await service.get_session(app_name="bench", user_id="u", session_id="s")
    assert stored is not None and len(stored.events) == 4 * turns
    return total


def adk_ours(ctx: Context, turns: int) -> tuple[float, int]:
    from agentfs.integrations.adk import AgentFSSessionService

    path = ctx.new_dir("w14-adk-agentfs")

    async def measure() -> float:
        service = AgentFSSessionService(path)
        try:
            return await _append_all(service, turns)
        finally:
            await service.close()

    seconds = asyncio.run(measure())
    ctx.report.note(f"{W}: Google ADK, agentfs: {store_bytes(path).per(turns, 'turn')}")
    return seconds, tree_size(path)


def adk_database(ctx: Context, turns: int) -> tuple[float, int]:
    from google.adk.sessions import DatabaseSessionService

    path: Path = ctx.new_dir("w14-adk-sqlite")

    async def measure() -> float:
        service = DatabaseSessionService(f"sqlite+aiosqlite:///{path / 'sessions.db'}")
        try:
            return await _append_all(service, turns)
        finally:
            await service.close()

    return asyncio.run(measure()), tree_size(path)


def _compare(ctx: Context, framework: str, peer: str, turns: int, ours: tuple[float, int] | None, theirs: tuple[float, int]) -> None:
    per_turn = None if ours is None else ours[0] / turns * 1000
    at_most(ctx, W, f"{framework}: persistence per turn (ms), {turns} turns", per_turn, peer, theirs[0] / turns * 1000, 1.0)
    at_most(ctx, W, f"{framework}: bytes on disk after {turns} turns", None if ours is None else ours[1], peer, theirs[1], 1.0)


def run(ctx: Context) -> None:
    turns = ctx.sizes.conv_steps
    try:
        import pydantic_ai  # noqa: F401
    except ImportError as exc:
        ctx.report.note(f"{W}: Pydantic AI: not installed ({exc}); its rows are empty")
    else:
        messages = [pydantic_turn(turn) for turn in range(turns)]
        ours = agentfs_part(ctx, W, "Pydantic AI", lambda: pydantic_ours(ctx, messages))
        _compare(ctx, "Pydantic AI", "JSON file", turns, ours, pydantic_json_file(ctx, messages))
    try:
        from google.adk.sessions import DatabaseSessionService  # noqa: F401
    except ImportError as exc:
        ctx.report.note(f"{W}: Google ADK: not installed ({exc}); its rows are empty")
    else:
        ours = agentfs_part(ctx, W, "Google ADK", lambda: adk_ours(ctx, turns))
        _compare(ctx, "Google ADK", "DatabaseSessionService (SQLite)", turns, ours, adk_database(ctx, turns))
    strands_rows(ctx, turns)


def strands_rows(ctx: Context, turns: int) -> None:
    """Strands' rows, from `python -m benchmarks.strands --json` run by the Strands venv's interpreter."""
    if not STRANDS_PYTHON.exists():
        ctx.report.note(f"{W}: Strands: not measured; no {STRANDS_PYTHON.relative_to(REPO)} (make test-strands makes it)")
        return
    command = [str(STRANDS_PYTHON), "-m", "benchmarks.strands", "--turns", str(turns), "--json"]
    out = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=1800)
    if out.returncode != 0:
        ctx.report.note(f"{W}: Strands: benchmarks.strands exited {out.returncode}: {out.stderr.strip()[-500:]}")
        return
    result = json.loads(out.stdout.strip().splitlines()[-1])

    def row(name: str) -> tuple[float, int]:
        return result[name]["ms_per_turn"] * turns / 1000, result[name]["bytes"]

    ours = row("agentfs_power") if ctx.agentfs is not None else None
    if ours is not None:
        ctx.report.note(f"{W}: Strands, agentfs durability='power': {result['agentfs_power']['split']}")
    peer = "FileSessionManager (no fsync)"
    theirs = row("file_session_manager")
    fig(
        ctx,
        W,
        f"Strands: persistence per turn (ms), {turns} turns",
        None if ours is None else ours[0] / turns * 1000,
        peer,
        theirs[0] / turns * 1000,
        note="agentfs fdatasyncs each commit (it survives power loss), FileSessionManager never syncs: the row with the goal is "
        "durability='process', which survives a killed process as FileSessionManager's files do",
    )
    at_most(ctx, W, f"Strands: bytes on disk after {turns} turns", None if ours is None else ours[1], peer, theirs[1], 1.0)
    like_for_like = None if ours is None else result["agentfs_process"]["ms_per_turn"]  # no fsync either: survives a killed process
    metric = f"Strands: persistence per turn (ms), {turns} turns, durability='process'"
    at_most(ctx, W, metric, like_for_like, peer, result["file_session_manager"]["ms_per_turn"], 1.0)
    resume = None if ours is None else result["agentfs_power"]["resume_s"]
    at_most(ctx, W, f"Strands: reading {4 * turns} messages back (s)", resume, peer, result["file_session_manager"]["resume_s"], 1.0)
