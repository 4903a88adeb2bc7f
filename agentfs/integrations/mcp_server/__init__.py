"""`agentfs mcp`: an agentfs store as an MCP server (`pip install 'agentfs-store[mcp]'`)."""

from ...extras import needs_extra

with needs_extra("mcp", "agentfs mcp"):
    from .server import AgentFSServer, latest_uri, serve, serve_http, serve_stdio

__all__ = ["AgentFSServer", "latest_uri", "serve", "serve_http", "serve_stdio"]
