"""Strands Agents session repository backed by agentfs (`pip install agentfs-store[strands]`)."""

from .layout import InvalidId
from .repository import AgentFSSessionRepository

__all__ = ["AgentFSSessionRepository", "InvalidId"]
