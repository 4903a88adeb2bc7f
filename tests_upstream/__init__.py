"""LangGraph's own test suite, run with AgentFSSaver beside the stock savers (issue 12).

`python -m tests_upstream` fetches the sdist of the installed langgraph (its tests only, cached
under .cache/), runs its checkpointer-parametrized tests with `plugin.py` adding AgentFSSaver to
the `sync_checkpointer` / `async_checkpointer` fixtures, and fails if a test that passes with both
stock savers (in-memory and SQLite) fails with an agentfs variant.
"""
