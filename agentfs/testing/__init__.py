"""Reusable test suites for code built on agentfs (needs pytest): `StoreConformance` for LangGraph stores."""

from .store_tests import INDEX, ManualClock, StoreConformance, embed_words

__all__ = ["INDEX", "ManualClock", "StoreConformance", "embed_words"]
