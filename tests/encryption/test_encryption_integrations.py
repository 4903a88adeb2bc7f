"""The integrations take the key as `agentfs.open` does: a Store opened encrypted, or a path with `encryption=`
(an `agentfs.Encryption`, a passphrase str, or True/the environment); a wrong key is `WrongKey`, never data."""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph.graph")
pytest.importorskip("agents")

from langgraph.checkpoint.memory import InMemorySaver

import agentfs
from agentfs.integrations.langgraph import AgentFSSaver, AgentFSStore
from agentfs.integrations.openai_agents import AgentFSSession
from tests.encryption.test_encryption import PASSPHRASE, encryption, every_byte
from tests.integrations.test_langgraph_graph import scenario

CANARY = "canaryTHREADID"
SECRET = "canarySECRETVALUE"


def test_a_langgraph_graph_on_an_encrypted_store_matches_in_memory_and_names_nothing(tmp_path: Path) -> None:
    root = tmp_path / "store"
    with agentfs.open(root, encryption=encryption()) as store:
        assert scenario(AgentFSSaver(store), CANARY) == scenario(InMemorySaver(), CANARY)
    assert CANARY.encode() not in every_byte(root)
    assert b"approve?" not in every_byte(root)  # an interrupt's question, in a checkpoint's pending writes


def test_an_openai_agents_session_on_an_encrypted_store_by_store_and_by_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "store"
    with agentfs.open(root, encryption=encryption()) as store:
        session = AgentFSSession(CANARY, store)
        asyncio.run(session.add_items([{"role": "user", "content": "canaryMESSAGE"}]))
    monkeypatch.setenv("AGENTFS_PASSWORD", PASSPHRASE)  # a path: the store unlocks from the environment
    again = AgentFSSession(CANARY, root)
    assert asyncio.run(again.get_items()) == [{"role": "user", "content": "canaryMESSAGE"}]
    again.close()
    data = every_byte(root)
    assert CANARY.encode() not in data and b"canaryMESSAGE" not in data


def refuses_a_wrong_key(make: Callable[[agentfs.Encryption], Any]) -> None:
    with pytest.raises(agentfs.WrongKey, match="wrong passphrase"):
        make(encryption("not the passphrase"))


def test_the_langgraph_saver_opens_a_path_with_encryption(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGENTFS_PASSWORD", raising=False)
    root = tmp_path / "store"
    saver = AgentFSSaver(root, encryption=encryption())  # creates the store encrypted, as agentfs.open does
    assert scenario(saver, CANARY) == scenario(InMemorySaver(), CANARY)
    saver.close()
    assert CANARY.encode() not in every_byte(root)
    refuses_a_wrong_key(lambda key: AgentFSSaver(root, encryption=key))
    with agentfs.open(root, encryption=PASSPHRASE) as store:  # a passphrase str, as agentfs.open takes it
        assert any(CANARY in name for name in store.runs())
    with agentfs.open(root, encryption=PASSPHRASE) as store, pytest.raises(ValueError, match="apply only when AgentFSSaver opens"):
        AgentFSSaver(store, encryption=PASSPHRASE)


def test_the_langgraph_store_opens_a_path_with_encryption(tmp_path: Path) -> None:
    root = tmp_path / "store"
    with AgentFSStore(root, encryption=encryption()) as memory:
        memory.put(("users", CANARY), "profile", {"name": SECRET})
    assert SECRET.encode() not in every_byte(root) and CANARY.encode() not in every_byte(root)
    refuses_a_wrong_key(lambda key: AgentFSStore(root, encryption=key))
    with AgentFSStore(root, encryption=encryption()) as memory:
        item = memory.get(("users", CANARY), "profile")
        assert item is not None and item.value == {"name": SECRET}


def test_the_openai_agents_session_opens_a_path_with_encryption(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AGENTFS_PASSWORD", raising=False)
    root = tmp_path / "store"
    session = AgentFSSession(CANARY, root, encryption=encryption())
    asyncio.run(session.add_items([{"role": "user", "content": SECRET}]))
    session.close()
    assert SECRET.encode() not in every_byte(root)
    refuses_a_wrong_key(lambda key: AgentFSSession(CANARY, root, encryption=key))
    with pytest.raises(agentfs.WrongKey, match="no passphrase or key file given"):  # encrypted, and no key anywhere
        AgentFSSession(CANARY, root)
    again = AgentFSSession(CANARY, root, encryption=encryption())
    assert asyncio.run(again.get_items()) == [{"role": "user", "content": SECRET}]
    again.close()


def test_the_adk_services_open_a_path_with_encryption(tmp_path: Path) -> None:
    pytest.importorskip("google.adk")
    from google.genai import types

    from agentfs.integrations.adk import AgentFSArtifactService, AgentFSSessionService

    root = tmp_path / "store"

    async def write() -> None:
        sessions = AgentFSSessionService(root, encryption=encryption())
        await sessions.create_session(app_name="app", user_id=CANARY, state={"note": SECRET}, session_id="s1")
        await sessions.close()
        artifacts = AgentFSArtifactService(root, encryption=encryption())
        await artifacts.save_artifact(app_name="app", user_id=CANARY, session_id="s1", filename="f.txt", artifact=types.Part(text=SECRET))
        await artifacts.close()

    async def read() -> tuple[Any, Any]:
        sessions = AgentFSSessionService(root, encryption=encryption())
        artifacts = AgentFSArtifactService(root, encryption=encryption())
        session = await sessions.get_session(app_name="app", user_id=CANARY, session_id="s1")
        part = await artifacts.load_artifact(app_name="app", user_id=CANARY, session_id="s1", filename="f.txt")
        await sessions.close()
        await artifacts.close()
        return session, part

    asyncio.run(write())
    assert SECRET.encode() not in every_byte(root) and CANARY.encode() not in every_byte(root)
    refuses_a_wrong_key(lambda key: AgentFSSessionService(root, encryption=key))
    refuses_a_wrong_key(lambda key: AgentFSArtifactService(root, encryption=key))
    session, part = asyncio.run(read())
    assert session is not None and session.state["note"] == SECRET
    assert part is not None and part.text == SECRET


def test_the_pydantic_ai_history_opens_a_path_with_encryption(tmp_path: Path) -> None:
    pytest.importorskip("pydantic_ai")
    from pydantic_ai.messages import ModelRequest, UserPromptPart

    from agentfs.integrations.pydantic_ai import AgentFSMessageHistory

    root = tmp_path / "store"
    with AgentFSMessageHistory(CANARY, root, encryption=encryption()) as history:
        history.append([ModelRequest(parts=[UserPromptPart(SECRET)])])
    assert SECRET.encode() not in every_byte(root) and CANARY.encode() not in every_byte(root)
    refuses_a_wrong_key(lambda key: AgentFSMessageHistory(CANARY, root, encryption=key))
    with AgentFSMessageHistory(CANARY, root, encryption=encryption()) as history:
        [request] = history.messages()
        assert isinstance(request, ModelRequest) and request.parts[0].content == SECRET


def test_the_mcp_server_opens_an_encrypted_store_with_the_clis_key_file_and_refuses_a_wrong_one(tmp_path: Path) -> None:
    pytest.importorskip("mcp")
    import anyio
    from mcp import Client, StdioServerParameters

    from tests.integrations.test_mcp import COMMAND, ENV, call

    root, key_file, other = tmp_path / "store", tmp_path / "agentfs.key", tmp_path / "other.key"
    key_file.write_bytes(b"k" * 40)
    other.write_bytes(b"o" * 40)
    with agentfs.open(root, encryption=agentfs.Encryption(key_file=key_file)) as store:
        store.run("notes").commit({"secret": SECRET})
    env = {key: value for key, value in ENV.items() if not key.startswith("AGENTFS_PASSWORD")}

    async def read_over_stdio() -> Any:
        arguments = [*COMMAND[1:], "--store", str(root), "--key-file", str(key_file), "mcp"]
        server = StdioServerParameters(command=COMMAND[0], args=arguments, env=env)
        with anyio.fail_after(60):
            async with Client(server) as client:
                return await call(client, "read_state", {"checkpoint": "notes", "key": "secret"})

    assert anyio.run(read_over_stdio)["value"] == SECRET
    refused = subprocess.run(
        [*COMMAND, "--store", str(root), "--key-file", str(other), "mcp"], capture_output=True, text=True, env=env, timeout=60, check=False
    )
    assert refused.returncode == 5, refused.stderr  # the CLI's exit code for a wrong key
    assert "wrong key file" in refused.stderr and len(refused.stderr.strip().splitlines()) == 1


def test_a_store_given_with_encryption_is_a_usage_error(tmp_path: Path) -> None:
    with agentfs.open(tmp_path / "store", encryption=encryption()) as store:
        with pytest.raises(ValueError, match="encryption apply only when AgentFSSession opens the store"):
            AgentFSSession("s", store, encryption=PASSPHRASE)
        with pytest.raises(ValueError, match="encryption apply only when AgentFSStore opens the store"):
            AgentFSStore(store, encryption=PASSPHRASE)


def test_an_integration_resumes_an_encrypted_remote_on_another_machine_with_encryption(tmp_path: Path) -> None:
    from agentfs.sync.pack_remote import PackRemote
    from agentfs.sync.push import Pusher
    from tests.servers import make_file_spec

    spec = make_file_spec(tmp_path)
    session = AgentFSSession(CANARY, tmp_path / "a", encryption=encryption())
    asyncio.run(session.add_items([{"role": "user", "content": SECRET}]))
    Pusher(session.store.engine, PackRemote(spec.url, spec.storage_options)).push()
    session.close()
    remote = {"remote": spec.url, "storage_options": spec.storage_options}
    refuses_a_wrong_key(lambda key: AgentFSSession(CANARY, tmp_path / "b", encryption=key, **remote))
    elsewhere = AgentFSSession(CANARY, tmp_path / "c", encryption=encryption(), **remote)  # a fresh store takes the remote's key
    assert asyncio.run(elsewhere.get_items()) == [{"role": "user", "content": SECRET}]
    elsewhere.close()
