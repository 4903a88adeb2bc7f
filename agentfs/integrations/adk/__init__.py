"""Google ADK session and artifact services backed by agentfs (`pip install agentfs-store[adk]`)."""

from .artifacts import AgentFSArtifactService
from .sessions import AgentFSSessionService

__all__ = ["AgentFSArtifactService", "AgentFSSessionService"]
