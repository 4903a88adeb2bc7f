"""Pydantic AI message histories backed by agentfs (`pip install agentfs-store[pydantic-ai]`)."""

from .history import AgentFSMessageHistory, ForkError

__all__ = ["AgentFSMessageHistory", "ForkError"]
