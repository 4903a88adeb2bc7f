"""The OpenAI Agents SDK's session protocol backed by agentfs (`pip install agentfs-store[openai-agents]`)."""

from ...extras import needs_extra

with needs_extra("openai-agents", "agentfs.integrations.openai_agents"):
    from .session import AgentFSSession, BranchError

__all__ = ["AgentFSSession", "BranchError"]
