"""LangGraph integrations backed by agentfs (`pip install agentfs-store[langgraph]`): a checkpointer and a store."""

from ...extras import needs_extra

with needs_extra("langgraph", "agentfs.integrations.langgraph"):
    from .saver import AgentFSSaver
    from .store import AgentFSStore
    from .store_query import StoreError

__all__ = ["AgentFSSaver", "AgentFSStore", "StoreError"]
