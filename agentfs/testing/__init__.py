"""Reusable test suites for code built on agentfs (needs pytest): `StoreConformance` for LangGraph stores;
`RemoteConformance` for a remote backend (an fsspec URL and its options);
`agentfs.testing.adk_services.AdkServiceConformance` for Google ADK session and artifact services
(imported from its module, so this package needs no ADK)."""

from .remote_tests import RemoteConformance, RemoteLocation
from .store_tests import INDEX, ManualClock, StoreConformance, embed_words

__all__ = ["INDEX", "ManualClock", "RemoteConformance", "RemoteLocation", "StoreConformance", "embed_words"]
