"""AgentFSSessionRepository answers every repository call as Strands' FileSessionManager does."""

from __future__ import annotations

from pathlib import Path

from strands.session.session_repository import SessionRepository

import agentfs
from agentfs.integrations.strands import AgentFSSessionRepository
from agentfs.testing.strands_repository import StrandsRepositoryConformance


class TestAgentFSSessionRepository(StrandsRepositoryConformance):
    def make_repository(self, tmp_path: Path) -> SessionRepository:
        return AgentFSSessionRepository(agentfs.open(tmp_path / "store"))
