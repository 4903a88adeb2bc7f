"""AgentFSStore's search without a query: newest first across namespaces, read only as far as the page goes."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

pytest.importorskip("langgraph.store.base")

import agentfs
from agentfs.integrations.langgraph import AgentFSStore
from agentfs.testing.store_tests import ManualClock

NAMESPACES = [("m", "a"), ("m", "b"), ("m", "c"), ("n",)]


def _reference(store: AgentFSStore, prefix: tuple[str, ...], topic: str | None) -> list[tuple[tuple[str, ...], str]]:
    """Every matching item, most recently updated first, ties in namespace then head order: one stable sort of all."""
    found = []
    for ns in sorted(NAMESPACES):
        if ns[: len(prefix)] == prefix:
            for key, record in store.heads.records(store.heads.run_name(ns)).items():
                if topic is None or record["value"]["topic"] == topic:
                    found.append((ns, key, record["updated"]))
    found.sort(key=lambda entry: entry[2], reverse=True)  # stable: ties keep their order
    return [(ns, key) for ns, key, _updated in found]


def test_pages_follow_one_newest_first_order_with_ties_and_updates(tmp_path: Path) -> None:
    clock = ManualClock()
    store = AgentFSStore(agentfs.open(tmp_path / "s", durability="process"), clock=clock)
    rng = random.Random(5)
    for i in range(120):
        if rng.random() < 0.5:
            clock.advance(1)  # else the same time as the item before: a tie
        store.put(rng.choice(NAMESPACES), f"k{rng.randrange(60)}", {"topic": rng.choice("xyz"), "n": i})
    for prefix in [(), ("m",), ("m", "b"), ("n",)]:
        for topic in (None, "x"):
            expected = _reference(store, prefix, topic)
            filter = None if topic is None else {"topic": topic}
            pages = [store.search(prefix, filter=filter, limit=7, offset=offset, refresh_ttl=False) for offset in range(0, 140, 7)]
            got = [(item.namespace, item.key) for page in pages for item in page]
            assert got == expected, f"prefix {prefix} topic {topic}"
    clock.advance(1)
    store.put(("m", "c"), "k0", {"topic": "x", "n": -1})  # a new head: the cached order of ("m", "c") is stale
    newest = store.search(("m",), limit=1, refresh_ttl=False)
    assert [(item.namespace, item.key, item.value["n"]) for item in newest] == [(("m", "c"), "k0", -1)]
