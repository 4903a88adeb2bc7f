"""AgentFSSession's usage tracking and turn queries against the SDK's AdvancedSQLiteSession on the same
turns (a real Runner on the SDK's ScriptedModel), and the tool call/output integrity check and repair.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

pytest.importorskip("agents")

from agents import Agent, Runner, Usage, function_tool, set_tracing_disabled
from agents.extensions.memory import AdvancedSQLiteSession
from agents.testing import ScriptedModel, assistant_message, function_call

import agentfs
from agentfs.integrations.openai_agents import AgentFSSession
from tests.cli.test_cli import cli, json_of

set_tracing_disabled(True)


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


@function_tool
def get_time(city: str) -> str:
    """The time in a city."""
    return f"noon in {city}"


def _script() -> list[Any]:
    return [
        [assistant_message("hello")],
        [function_call("get_weather", {"city": "Paris"}, call_id="w1")],
        [function_call("get_weather", {"city": "Rome"}, call_id="w2"), function_call("get_time", {"city": "Rome"}, call_id="t1")],
        [assistant_message("sunny, noon")],
        [assistant_message("bye")],
    ]


async def _turns(session: Any) -> list[Any]:
    """Three turns, each run's usage made distinct (tokens by turn), stored after it; then every query."""
    agent = Agent(name="assistant", model=ScriptedModel(_script()), tools=[get_weather, get_time])
    for turn, question in enumerate(["hi", "weather in Paris and Rome?", "thanks"], 1):
        result = await Runner.run(agent, question, session=session)
        usage = result.context_wrapper.usage
        usage.input_tokens, usage.output_tokens = 100 * turn + 7, 10 * turn + 3
        usage.total_tokens = usage.input_tokens + usage.output_tokens
        usage.input_tokens_details.cached_tokens = turn
        await session.store_run_usage(result)
    await session.store_run_usage(result)  # again for the same turn: replaces its record
    return [
        await session.get_session_usage(),
        await session.get_session_usage(branch_id="main"),
        await session.get_turn_usage(),
        await session.get_turn_usage(2),
        await session.get_turn_usage(9),
        await session.get_tool_usage(),
        await session.get_conversation_by_turns(),
    ]


def test_usage_and_turn_queries_match_advanced_sqlite_session_on_the_same_turns(tmp_path: Path) -> None:
    with agentfs.open(tmp_path / "store") as store:
        session = AgentFSSession("chat", store)
        ours = asyncio.run(_turns(session))
        theirs = asyncio.run(_turns(AdvancedSQLiteSession(session_id="chat", create_tables=True)))
        for index, (mine, sdks) in enumerate(zip(ours, theirs, strict=True)):
            assert mine == sdks, f"query {index}"
        inputs, outputs = sum(100 * turn + 7 for turn in (1, 2, 3)), sum(10 * turn + 3 for turn in (1, 2, 3))
        assert ours[0] == {
            "requests": 5,
            "input_tokens": inputs,
            "output_tokens": outputs,
            "total_tokens": inputs + outputs,
            "total_turns": 3,
        }
        assert [cp.metadata["operation"] for cp in session.run.history()[:2]] == ["store_run_usage", "store_run_usage"]

        async def branch_and_clear() -> None:
            await session.create_branch_from_turn(3, "retry")  # holds turns 1 and 2, and their usage
            assert [record["user_turn_number"] for record in await session.get_turn_usage()] == [1, 2]
            assert (await session.get_session_usage())["total_turns"] == 5  # type: ignore[index]  # every branch
            await session.add_items([{"role": "user", "content": "more"}])  # a change carries the usage forward
            assert (await session.get_session_usage(branch_id="retry"))["total_turns"] == 2  # type: ignore[index]
            await session.clear_session()
            assert await session.get_session_usage() is None

        asyncio.run(branch_and_clear())


def _orphaned() -> list[Any]:
    """A history bricked as in the SDK's reports: an output whose call was lost, and a call whose output was."""
    return [
        {"role": "user", "content": "weather?"},
        {"type": "function_call_output", "call_id": "lost", "output": "sunny"},
        {"type": "function_call", "call_id": "w1", "name": "get_weather", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "w1", "output": "rain"},
        {"type": "function_call", "call_id": "cut", "name": "get_weather", "arguments": "{}"},
        {"role": "assistant", "content": "rain"},
    ]


def test_a_planted_orphan_tool_output_and_a_call_without_output_are_found_and_repaired(tmp_path: Path) -> None:
    with agentfs.open(tmp_path / "store") as store:
        session = AgentFSSession("chat", store)

        async def plant_check_repair() -> None:
            await session.add_items(_orphaned())
            found = await session.check_tool_pairs()
            assert [(f.position, f.kind, f.call_id) for f in found] == [
                (1, "output without call", "lost"),
                (4, "call without output", "cut"),
            ]
            before = session.run.head_id()
            assert [(f.position, f.call_id) for f in await session.repair_tool_pairs()] == [(1, "lost"), (4, "cut")]
            assert await session.check_tool_pairs() == [] and await session.repair_tool_pairs() == []  # sound: no commit
            kept = await session.get_items()
            assert [item.get("call_id") for item in kept] == [None, "w1", "w1", None]
            assert session.run.get(before).state["items"][1][1]["call_id"] == "lost"  # the checkpoint before keeps them
            model = ScriptedModel([[assistant_message("fine")]])
            await Runner.run(Agent(name="assistant", model=model, tools=[get_weather]), "and now?", session=session)
            assert model.last_call is not None and [i.get("call_id") for i in model.last_call.input if isinstance(i, dict)] == [
                None,
                "w1",
                "w1",
                None,
                None,
            ]

        asyncio.run(plant_check_repair())


def test_agentfs_verify_reports_the_unpaired_items_and_passes_after_the_repair(tmp_path: Path) -> None:
    with agentfs.open(tmp_path / "store") as store:
        asyncio.run(AgentFSSession("chat", store).add_items(_orphaned()))
    result = cli("verify", "--json", store=tmp_path / "store")
    assert result.returncode == 1, result.stderr
    problems = [(p["kind"], p["where"], p["detail"].split(";")[0]) for p in json_of(result)["problems"]]
    assert problems == [
        ("tool-pairs", "openai-agents/chat/main", "output without call 'lost' (function_call_output) at item 1"),
        ("tool-pairs", "openai-agents/chat/main", "call without output 'cut' (function_call) at item 4"),
    ]
    with agentfs.open(tmp_path / "store") as store:
        asyncio.run(AgentFSSession("chat", store).repair_tool_pairs())
    assert cli("verify", store=tmp_path / "store").returncode == 0


def test_storing_usage_encodes_none_of_the_sessions_items_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """store_run_usage leaves the items as they are: its commit extends the head's list by nothing, so it encodes the
    usage records and not the whole session (which a long session paid at every turn)."""
    from agentfs.core import commit_input

    encoded: list[int] = []
    encode_body = commit_input.encode_body

    def counting(value: Any, path: Any = "state") -> tuple[int, int, bytes]:
        fmt, count, data = encode_body(value, path)
        encoded.append(len(data))
        return fmt, count, data

    with agentfs.open(tmp_path / "store") as store:
        session = AgentFSSession("long", store)
        items = [{"role": "user" if n % 2 else "assistant", "content": f"message {n} " + "x" * 400} for n in range(300)]
        asyncio.run(session.add_items(items))

        usage = Usage(requests=1, input_tokens=10, output_tokens=2, total_tokens=12)
        result = SimpleNamespace(context_wrapper=SimpleNamespace(usage=usage))  # the shape of Runner.run's result
        monkeypatch.setattr(commit_input, "encode_body", counting)
        asyncio.run(session.store_run_usage(result))
        assert encoded, "store_run_usage committed nothing"
        assert max(encoded) < 2_000, f"a value of {max(encoded)} bytes was encoded: the session's items again"
        monkeypatch.undo()
        assert asyncio.run(session.get_items()) == items
        assert (asyncio.run(session.get_session_usage()) or {})["input_tokens"] == 10
        fresh = AgentFSSession("long", store)
        assert asyncio.run(fresh.get_items()) == items
