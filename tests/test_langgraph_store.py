"""AgentFSStore: the store conformance class on the reference InMemoryStore, SqliteStore and AgentFSStore,
then what only agentfs promises (durable, synced through a remote, several writing processes)."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from langgraph.store.base import IndexConfig, TTLConfig
from langgraph.store.memory import InMemoryStore
from langgraph.store.sqlite import SqliteStore

from agentfs.integrations.langgraph import AgentFSStore
from agentfs.testing import ManualClock, StoreConformance


class TestInMemoryStore(StoreConformance):
    supports_ttl = False
    lists_emptied_namespaces = True
    keeps_created_at = False

    def make_store(
        self, tmp_path: Path, *, index: IndexConfig | None = None, ttl: TTLConfig | None = None, clock: ManualClock | None = None
    ) -> InMemoryStore:
        return InMemoryStore(index=index)


class TestSqliteStore(StoreConformance):
    # sqlite-vec is loaded as an SQLite extension: this Python's sqlite3 may be built without extension loading
    supports_vector = hasattr(sqlite3.Connection, "enable_load_extension")
    supports_async = False  # its async twin is AsyncSqliteStore

    @contextmanager
    def make_store(
        self, tmp_path: Path, *, index: IndexConfig | None = None, ttl: TTLConfig | None = None, clock: ManualClock | None = None
    ) -> Iterator[SqliteStore]:
        tmp_path.mkdir(parents=True)
        with SqliteStore.from_conn_string(str(tmp_path / "store.db"), index=index, ttl=ttl) as store:  # type: ignore[arg-type]
            store.setup()
            yield store


class TestAgentFSStore(StoreConformance):
    supports_clock = True

    def make_store(
        self, tmp_path: Path, *, index: IndexConfig | None = None, ttl: TTLConfig | None = None, clock: ManualClock | None = None
    ) -> AgentFSStore:
        return AgentFSStore(tmp_path / ".agentfs", index=index, ttl=ttl, **({"clock": clock} if clock else {}))
