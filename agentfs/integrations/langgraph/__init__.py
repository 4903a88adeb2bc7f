"""LangGraph integrations backed by agentfs (`pip install agentfs-store[langgraph]`): a checkpointer and a store."""

from .saver import AgentFSSaver
from .store import AgentFSStore
from .store_query import StoreError

__all__ = ["AgentFSSaver", "AgentFSStore", "StoreError"]
