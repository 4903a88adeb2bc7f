"""Reusable test suites for code built on agentfs (needs pytest): `StoreConformance` for LangGraph stores;
`agentfs.testing.adk_services.AdkServiceConformance` for Google ADK session and artifact services
(imported from its module, so this package needs no ADK)."""

from .store_tests import INDEX, ManualClock, StoreConformance, embed_words

__all__ = ["INDEX", "ManualClock", "StoreConformance", "embed_words"]
