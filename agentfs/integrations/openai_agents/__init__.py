"""The OpenAI Agents SDK's session protocol backed by agentfs (`pip install agentfs-store[openai-agents]`)."""

from .session import AgentFSSession, BranchError

__all__ = ["AgentFSSession", "BranchError"]
