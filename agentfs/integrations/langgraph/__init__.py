"""A LangGraph checkpointer backed by agentfs (`pip install agentfs[langgraph]`)."""

from .saver import AgentFSSaver

__all__ = ["AgentFSSaver"]
