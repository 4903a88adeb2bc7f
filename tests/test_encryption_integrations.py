"""A Store opened encrypted works through the integrations, which take a Store (or a path: unlocked from the environment)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

pytest.importorskip("langgraph.graph")
pytest.importorskip("agents")

from langgraph.checkpoint.memory import InMemorySaver

import agentfs
from agentfs.integrations.langgraph import AgentFSSaver
from agentfs.integrations.openai_agents import AgentFSSession
from tests.test_encryption import PASSPHRASE, encryption, every_byte
from tests.test_langgraph_graph import scenario

CANARY = "canaryTHREADID"


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
