"""Conversations outside the browser: `agentfs thread` and `agentfs session` (text and --json), the MCP tool
read_conversation, and the LangGraph reader that imports nothing a record names."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

import msgpack
import pytest
from starlette.testclient import TestClient

import agentfs
from agentfs.cli.main import main
from agentfs.integrations.langgraph_conversation import PlainSerde
from agentfs.integrations.mcp_server.conversation_tool import ConversationArguments, read_conversation
from agentfs.integrations.openai_agents import AgentFSSession
from agentfs.ui.app import Settings, create_app
from agentfs.ui.security import COOKIE, Guard
from tests.ui_fixtures import build_langgraph_thread


@pytest.fixture(scope="module")
def store_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("conversations") / "store"
    build_langgraph_thread(path, "chat-1")

    async def fill() -> None:
        session = AgentFSSession("support-7", agentfs.open(path))
        await session.add_items([{"role": "user", "content": "My order is late"}, {"role": "assistant", "content": "Let me check."}])

    asyncio.run(fill())
    return path


def test_thread_prints_messages_tool_calls_and_the_interrupt(store_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--store", str(store_path), "thread", "chat-1"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("thread 'chat-1' at ") and lines[0].endswith("3 messages")
    assert lines[1] == "[human] What is the weather in Paris?"
    assert lines[3] == '    calls lookup({"city": "Paris"}) id call-1'
    assert lines[4] == "[tool (lookup) -> call-1] 18 degrees, sunny"
    assert "Send this answer?" in lines[5] and lines[5].startswith("[interrupt]")


def test_thread_json_and_an_earlier_checkpoint(store_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--store", str(store_path), "thread", "chat-1", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert [message["role"] for message in document["messages"]] == ["human", "ai", "tool"]
    assert [step["source"] for step in document["steps"]] == ["input", "loop", "loop", "loop"]
    assert [step["nodes"] for step in document["steps"]] == [["__input__"], ["__start__"], ["agent"], ["tools"]]  # review is interrupted
    assert document["steps"][2]["writes"] == ["branch:to:tools", "messages"]
    first_loop = document["steps"][1]["checkpoint_id"]
    assert main(["--store", str(store_path), "thread", "chat-1", "--json", "--checkpoint", first_loop]) == 0
    earlier = json.loads(capsys.readouterr().out)
    assert [message["role"] for message in earlier["messages"]] == ["human"] and earlier["at"] == first_loop
    assert main(["--store", str(store_path), "thread", "no-such-thread"]) == 3
    assert "LangGraph thread 'no-such-thread'" in capsys.readouterr().err


def test_session_prints_items(store_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--store", str(store_path), "session", "support-7", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    assert [(message["role"], message["text"]) for message in document["messages"]] == [
        ("user", "My order is late"),
        ("assistant", "Let me check."),
    ]
    assert main(["--store", str(store_path), "session", "nobody"]) == 3


def test_mcp_tool_returns_the_conversation(store_path: Path) -> None:
    with agentfs.open(store_path) as store:
        thread = read_conversation(store, ConversationArguments(kind="thread", name="chat-1"))
        session = read_conversation(store, ConversationArguments(kind="session", name="support-7"))
    assert thread["messages"][1]["tool_calls"] == [{"name": "lookup", "args": {"city": "Paris"}, "id": "call-1"}]
    assert thread["interrupts"][0]["value"] == {"question": "Send this answer?"}
    assert session["messages"][0]["text"] == "My order is late"


def test_a_record_naming_a_module_imports_nothing() -> None:
    canary = "agentfs_ui_canary_module"
    inner = msgpack.packb([canary, "Boom", {"content": "hi", "type": "ai"}, "model_validate_json"])
    record = msgpack.packb([msgpack.ExtType(5, inner)])
    decoded = PlainSerde().loads_typed(("msgpack", record))
    assert decoded == [{"__type__": f"{canary}.Boom", "content": "hi", "type": "ai"}]
    assert canary not in sys.modules
    with pytest.raises(agentfs.FormatError, match="does not decode"):
        PlainSerde().loads_typed(("msgpack", b"\xc1"))


def test_ui_lists_the_thread_and_the_session_and_shows_the_session(store_path: Path) -> None:
    guard = Guard()
    guard.serve_at("127.0.0.1", 8123)
    with agentfs.open(store_path) as store:
        browser = TestClient(create_app(store, guard, Settings()), base_url="http://127.0.0.1:8123")
        browser.cookies.set(COOKIE, guard.token)
        runs = browser.get("/").text
        assert 'class="thread-link" href="/thread?id=chat-1"' in runs and 'class="session-link" href="/session?id=support-7"' in runs
        assert "langgraph/" not in runs and "openai-agents/" not in runs  # their internal runs are not listed
        session = browser.get("/session?id=support-7").text
        assert '<div class="message user">' in session and "My order is late" in session
