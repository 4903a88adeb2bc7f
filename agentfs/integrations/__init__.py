"""Adapters that keep an agent framework's state in an agentfs store (each behind its own extra)."""
