"""A LangGraph checkpointer backed by agentfs (`pip install agentfs-store[langgraph]`)."""

from .saver import AgentFSSaver

__all__ = ["AgentFSSaver"]
