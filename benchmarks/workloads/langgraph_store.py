"""Workload 11: LangGraph long-term memory stores (issue 12): AgentFSStore next to SqliteStore and InMemoryStore.

An agent's memories: ITEMS small items (a fact, a topic, a counter) put round-robin into NAMESPACES
namespaces ("memories", "user-<n>"), so each namespace ends with ITEMS / NAMESPACES items; then
GETS gets of random keys and SEARCHES searches: a filtered search in one namespace
(`filter={"topic": ...}, limit=10`) and a search over every namespace (`("memories",)`,
`limit=10`). Reads pass `refresh_ttl=False` (no item has a TTL, so nothing is written either way).
Stores: AgentFSStore on `agentfs.open(dir)` (fsync) and with `durability="process"`; SqliteStore
on a file (SQLite's defaults: rollback journal, synchronous=FULL, so every put fsyncs);
InMemoryStore. Latency rows have no goal: the issue asks for the figures side by side.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..context import Context
from .common import agentfs_part, fig, median

W = "11 langgraph store"
NAMESPACES = 10
TOPICS = ("food", "travel", "work", "family", "health")
FSYNCS = {"SqliteStore": "fsync (synchronous=FULL)", "InMemoryStore": "memory only"}


def sizes(ctx: Context) -> tuple[int, int, int]:
    """(puts, gets, searches of each kind)."""
    return (200, 100, 20) if ctx.quick else (2000, 500, 100)


def item(i: int) -> tuple[tuple[str, ...], str, dict[str, Any]]:
    namespace = ("memories", f"user-{i % NAMESPACES}")
    return namespace, f"fact-{i:06d}", {"fact": f"remembered thing number {i} " + "x" * 120, "topic": TOPICS[i % len(TOPICS)], "n": i}


def drive(store: Any, puts: int, gets: int, searches: int) -> dict[str, list[float]]:
    rng = random.Random(12)
    ms: dict[str, list[float]] = {"put": [], "get": [], "search one namespace, filtered": [], "search every namespace": []}

    def timed(metric: str, call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        t = time.perf_counter()
        result = call(*args, **kwargs)
        ms[metric].append((time.perf_counter() - t) * 1000)
        return result

    for i in range(puts):
        timed("put", store.put, *item(i))
    for _ in range(gets):
        namespace, key, value = item(rng.randrange(puts))
        got = timed("get", store.get, namespace, key, refresh_ttl=False)
        assert got is not None and got.value == value, f"{type(store).__name__}: get returned {got!r}"
    for n in range(searches):
        topic = TOPICS[n % len(TOPICS)]
        one = timed("search one namespace, filtered", store.search, item(n)[0], filter={"topic": topic}, limit=10, refresh_ttl=False)
        every = timed("search every namespace", store.search, ("memories",), limit=10, refresh_ttl=False)
        assert len(one) == len(every) == 10, f"{type(store).__name__}: searches found {len(one)} and {len(every)}"
    return ms


@contextmanager
def sqlite_store(root: Path) -> Iterator[Any]:
    from langgraph.store.sqlite import SqliteStore

    with SqliteStore.from_conn_string(str(root / "store.db")) as store:
        store.setup()
        yield store


def run(ctx: Context) -> None:
    from langgraph.store.memory import InMemoryStore

    puts, gets, searches = sizes(ctx)

    def agentfs_side(durability: str) -> dict[str, list[float]]:
        from agentfs.integrations.langgraph import AgentFSStore

        with AgentFSStore(ctx.new_dir(f"w11-agentfs-{durability}"), durability=durability) as store:  # type: ignore[arg-type]
            return drive(store, puts, gets, searches)

    ours = {d: agentfs_part(ctx, W, f"AgentFSStore ({d})", lambda d=d: agentfs_side(d)) for d in ("power", "process")}
    with sqlite_store(ctx.new_dir("w11-sqlite")) as store:
        peers = {"SqliteStore": drive(store, puts, gets, searches)}
    peers["InMemoryStore"] = drive(InMemoryStore(), puts, gets, searches)
    ctx.report.note(
        f"{W}: {puts} puts of ~200-byte items into {NAMESPACES} namespaces ({puts // NAMESPACES} items each at the end), "
        f"{gets} gets, {searches} searches of each kind (limit=10); AgentFSStore fsync is compared with SqliteStore "
        "(fsync), durability=process with InMemoryStore (memory only)"
    )
    for peer, durability in (("SqliteStore", "power"), ("InMemoryStore", "process")):
        got = ours[durability]
        label = "fsync" if durability == "power" else "durability=process"
        for metric, theirs in peers[peer].items():
            value = median(got[metric]) if got else None
            fig(ctx, W, f"{metric} median (ms), AgentFSStore {label}", value, peer, median(theirs), note=f"peer: {FSYNCS[peer]}")
