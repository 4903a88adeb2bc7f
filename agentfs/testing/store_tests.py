"""A conformance test class for LangGraph stores (`langgraph.store.base.BaseStore`).

Subclass `StoreConformance` in a test module, implement `make_store`, and set the capability flags;
pytest collects every behaviour below for your store:

    class TestMyStore(StoreConformance):
        supports_clock = True                      # make_store honours `clock`
        def make_store(self, tmp_path, *, index=None, ttl=None, clock=None):
            return MyStore(tmp_path / "db", index=index, ttl=ttl, clock=clock)

`make_store` may return a store or a context manager that yields one. Needs pytest, numpy and
langgraph. The reference is LangGraph's InMemoryStore; where stock stores differ, a flag says so.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, ExitStack
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from langgraph.store.base import BaseStore, GetOp, IndexConfig, InvalidNamespaceError, PutOp, SearchOp, TTLConfig

DIMS = 256  # the test vocabulary has no two words on one dimension but 'red' and 'apples' (always together)


class ManualClock:
    """A clock that moves only when told: `clock()` is seconds since the epoch, `clock.advance(s)` moves it."""

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def embed_words(texts: Sequence[str]) -> list[list[float]]:
    """A deterministic bag-of-words embedding: each word adds 1 to a dimension chosen by its hash."""
    vectors = np.zeros((len(texts), DIMS))
    for row, text in enumerate(texts):
        for word in text.lower().split():
            vectors[row, int.from_bytes(hashlib.sha256(word.encode()).digest()[:4], "big") % DIMS] += 1.0
    return vectors.tolist()


async def aembed_words(texts: Sequence[str]) -> list[list[float]]:
    return embed_words(texts)


def cosine(a: list[float], b: list[float]) -> float:
    x, y = np.asarray(a), np.asarray(b)
    return float(x @ y / (np.linalg.norm(x) * np.linalg.norm(y)))


INDEX = IndexConfig(dims=DIMS, embed=embed_words, fields=["text"])
TTL_MINUTES = 1.0
Opener = Callable[..., Any]  # make_store's options -> an open store (Any: a store's own methods, e.g. sweep_ttl)


class StoreConformance:
    """Every behaviour of a LangGraph store, checked against what InMemoryStore (the reference) does."""

    supports_ttl = True  # put(ttl=...) is accepted (else it must raise NotImplementedError)
    supports_clock = False  # make_store honours `clock`: expiry and refresh can be shown without waiting
    supports_vector = True  # make_store honours `index`
    lists_emptied_namespaces = False  # InMemoryStore lists a namespace once touched, even after its last delete
    keeps_created_at = True  # an update keeps the item's created_at (InMemoryStore resets it)
    supports_async = True  # aput/aget/asearch/... work (SqliteStore leaves them to AsyncSqliteStore)

    def make_store(
        self, tmp_path: Path, *, index: IndexConfig | None = None, ttl: TTLConfig | None = None, clock: ManualClock | None = None
    ) -> BaseStore | AbstractContextManager[BaseStore]:
        raise NotImplementedError("a StoreConformance subclass implements make_store")

    @pytest.fixture
    def opened(self, tmp_path: Path) -> Iterator[Opener]:
        """A function that opens a store (closed after the test) with make_store's options."""
        with ExitStack() as stack:
            count = itertools.count()

            def open_store(**options: Any) -> BaseStore:
                made = self.make_store(tmp_path / f"store-{next(count)}", **options)
                return stack.enter_context(made) if isinstance(made, AbstractContextManager) else made

            yield open_store

    @pytest.fixture
    def store(self, opened: Opener) -> BaseStore:
        return opened()

    @pytest.fixture
    def vector_store(self, opened: Opener) -> BaseStore:
        if not self.supports_vector:
            pytest.skip(f"{type(self).__name__}: no vector index here")
        return opened(index=INDEX)

    @pytest.fixture
    def clock(self) -> ManualClock:
        if not self.supports_clock:
            pytest.skip(f"{type(self).__name__}: its clock cannot be controlled, so expiry would need real minutes")
        return ManualClock()

    # items

    def test_put_then_get(self, store: BaseStore) -> None:
        store.put(("users", "alice"), "prefs", {"theme": "dark", "n": 1})
        item = store.get(("users", "alice"), "prefs")
        assert item is not None
        assert (item.namespace, item.key, item.value) == (("users", "alice"), "prefs", {"theme": "dark", "n": 1})
        assert item.created_at <= item.updated_at
        assert store.get(("users", "alice"), "missing") is None
        assert store.get(("users", "bob"), "prefs") is None

    def test_update_keeps_created_at(self, store: BaseStore) -> None:
        store.put(("docs",), "a", {"v": 1})
        first = store.get(("docs",), "a")
        store.put(("docs",), "a", {"v": 2})
        second = store.get(("docs",), "a")
        assert first is not None and second is not None
        assert second.value == {"v": 2}
        if self.keeps_created_at:
            assert second.created_at == first.created_at
        assert second.updated_at >= first.updated_at

    def test_delete(self, store: BaseStore) -> None:
        store.put(("docs",), "a", {"v": 1})
        store.put(("docs",), "b", {"v": 2})
        store.delete(("docs",), "a")
        store.delete(("docs",), "never-there")
        assert store.get(("docs",), "a") is None
        assert store.get(("docs",), "b") is not None
        assert [item.key for item in store.search(("docs",))] == ["b"]

    def test_namespaces_are_separate(self, store: BaseStore) -> None:
        store.put(("a",), "k", {"v": "a"})
        store.put(("a", "b"), "k", {"v": "ab"})
        store.put(("b",), "k", {"v": "b"})
        assert [store.get(ns, "k").value["v"] for ns in [("a",), ("a", "b"), ("b",)]] == ["a", "ab", "b"]  # type: ignore[union-attr]

    def test_unusual_labels_and_keys(self, store: BaseStore) -> None:
        namespace = ("user/with slash", "ünïcode ✓", "x" * 300)
        store.put(namespace, "key with spaces/and:colons", {"ok": True})
        item = store.get(namespace, "key with spaces/and:colons")
        assert item is not None and item.namespace == namespace
        assert namespace in store.list_namespaces(prefix=("user/with slash",))

    @pytest.mark.parametrize("namespace", [(), ("a.b",), ("langgraph", "x"), ("a", "")])
    def test_invalid_namespaces_are_refused(self, store: BaseStore, namespace: tuple[str, ...]) -> None:
        with pytest.raises(InvalidNamespaceError):
            store.put(namespace, "k", {"v": 1})

    def test_batch_reads_and_writes_in_order(self, store: BaseStore) -> None:
        store.put(("docs",), "a", {"v": 1})
        results = store.batch(
            [
                GetOp(("docs",), "a"),
                PutOp(("docs",), "b", {"v": 2}),
                PutOp(("docs",), "b", {"v": 3}),  # the last put of a key in a batch wins
                SearchOp(("docs",), None, 10, 0),
            ]
        )
        assert len(results) == 4
        assert results[0] is not None and results[0].value == {"v": 1}  # type: ignore[union-attr]
        assert results[1] is None and results[2] is None
        assert store.get(("docs",), "b").value == {"v": 3}  # type: ignore[union-attr]

    def test_async_api(self, store: BaseStore) -> None:
        if not self.supports_async:
            pytest.skip(f"{type(self).__name__} has no async methods")

        async def scenario() -> None:
            await store.aput(("async",), "a", {"v": 1})
            await store.aput(("async", "deep"), "b", {"v": 2})
            assert (await store.aget(("async",), "a")).value == {"v": 1}  # type: ignore[union-attr]
            assert {item.key for item in await store.asearch(("async",))} == {"a", "b"}
            assert await store.alist_namespaces(prefix=("async",)) == [("async",), ("async", "deep")]
            await store.adelete(("async",), "a")
            assert await store.aget(("async",), "a") is None

        asyncio.run(scenario())

    # search

    def test_search_by_prefix(self, store: BaseStore) -> None:
        store.put(("users", "alice", "notes"), "1", {"v": 1})
        store.put(("users", "bob"), "2", {"v": 2})
        store.put(("usersx",), "3", {"v": 3})
        store.put(("teams",), "4", {"v": 4})
        assert {item.key for item in store.search(("users",))} == {"1", "2"}
        assert {item.key for item in store.search(("users", "alice"))} == {"1"}
        assert {item.key for item in store.search(())} == {"1", "2", "3", "4"}
        assert store.search(("nobody",)) == []

    def test_search_filters(self, store: BaseStore) -> None:
        for i in range(6):
            store.put(("docs",), f"d{i}", {"n": i, "kind": "even" if i % 2 == 0 else "odd", "meta": {"lang": "en" if i < 3 else "fr"}})

        def keys(filter: dict[str, Any]) -> set[str]:
            return {item.key for item in store.search(("docs",), filter=filter)}

        assert keys({"kind": "odd"}) == {"d1", "d3", "d5"}
        assert keys({"n": {"$eq": 2}}) == {"d2"}
        assert keys({"n": {"$ne": 2}}) == {"d0", "d1", "d3", "d4", "d5"}
        assert keys({"n": {"$gt": 3}}) == {"d4", "d5"}
        assert keys({"n": {"$gte": 3}}) == {"d3", "d4", "d5"}
        assert keys({"n": {"$lt": 2}}) == {"d0", "d1"}
        assert keys({"n": {"$lte": 2}}) == {"d0", "d1", "d2"}
        assert keys({"n": {"$gt": 1, "$lt": 4}}) == {"d2", "d3"}
        assert keys({"kind": "even", "n": {"$gt": 0}}) == {"d2", "d4"}
        assert keys({"kind": "none"}) == set()

    def test_search_pagination(self, store: BaseStore) -> None:
        for i in range(7):
            store.put(("docs", str(i % 2)), f"d{i}", {"n": i})
        pages = [store.search(("docs",), limit=3, offset=offset) for offset in (0, 3, 6, 9)]
        assert [len(page) for page in pages] == [3, 3, 1, 0]
        keys = [item.key for page in pages for item in page]
        assert sorted(keys) == [f"d{i}" for i in range(7)]  # every item once, none twice

    # namespaces

    def test_list_namespaces(self, store: BaseStore) -> None:
        for ns in [("a", "b", "c"), ("a", "b", "d"), ("a", "e"), ("x", "b", "c"), ("x",)]:
            store.put(ns, "k", {"v": 1})
        assert store.list_namespaces() == [("a", "b", "c"), ("a", "b", "d"), ("a", "e"), ("x",), ("x", "b", "c")]
        assert store.list_namespaces(prefix=("a",)) == [("a", "b", "c"), ("a", "b", "d"), ("a", "e")]
        assert store.list_namespaces(prefix=("a", "b", "c", "d")) == []
        assert store.list_namespaces(suffix=("c",)) == [("a", "b", "c"), ("x", "b", "c")]
        assert store.list_namespaces(prefix=("*", "b")) == [("a", "b", "c"), ("a", "b", "d"), ("x", "b", "c")]
        assert store.list_namespaces(suffix=("b", "*")) == [("a", "b", "c"), ("a", "b", "d"), ("x", "b", "c")]
        assert store.list_namespaces(prefix=("a",), suffix=("d",)) == [("a", "b", "d")]
        assert store.list_namespaces(max_depth=1) == [("a",), ("x",)]
        assert store.list_namespaces(max_depth=2) == [("a", "b"), ("a", "e"), ("x",), ("x", "b")]
        assert store.list_namespaces(limit=2) == [("a", "b", "c"), ("a", "b", "d")]
        assert store.list_namespaces(limit=2, offset=2) == [("a", "e"), ("x",)]

    def test_emptied_namespace_is_not_listed(self, store: BaseStore) -> None:
        if self.lists_emptied_namespaces:
            pytest.skip(f"{type(self).__name__} lists a namespace after its last item is deleted")
        store.put(("gone",), "k", {"v": 1})
        store.put(("kept",), "k", {"v": 1})
        store.delete(("gone",), "k")
        assert store.list_namespaces() == [("kept",)]

    # TTL

    def test_ttl_is_accepted_or_refused(self, store: BaseStore) -> None:
        if not self.supports_ttl:
            assert not store.supports_ttl
            with pytest.raises(NotImplementedError):
                store.put(("t",), "k", {"v": 1}, ttl=TTL_MINUTES)
            return
        assert store.supports_ttl
        store.put(("t",), "k", {"v": 1}, ttl=TTL_MINUTES)
        assert store.get(("t",), "k").value == {"v": 1}  # type: ignore[union-attr]
        store.put(("t",), "forever", {"v": 2}, ttl=None)
        assert store.get(("t",), "forever") is not None

    def test_ttl_expiry_in_real_time(self, opened: Opener) -> None:
        if not self.supports_ttl:
            pytest.skip(f"{type(self).__name__} has no TTL")
        store = opened(ttl={"refresh_on_read": False})
        store.put(("t",), "short", {"v": 1}, ttl=0.01)  # 0.6 s
        store.put(("t",), "long", {"v": 2}, ttl=10.0)
        time.sleep(2.1)  # SqliteStore compares expiry with CURRENT_TIMESTAMP, whole seconds: up to 1 s late
        assert store.sweep_ttl() == 1
        assert store.get(("t",), "short") is None
        assert store.get(("t",), "long") is not None

    def test_ttl_expiry_by_sweep(self, opened: Opener, clock: ManualClock) -> None:
        store = opened(ttl={"refresh_on_read": False}, clock=clock)
        store.put(("t",), "short", {"v": 1}, ttl=TTL_MINUTES)
        store.put(("t",), "long", {"v": 2}, ttl=10 * TTL_MINUTES)
        store.put(("t",), "forever", {"v": 3})
        clock.advance(59)
        assert store.sweep_ttl() == 0
        clock.advance(2)
        assert store.get(("t",), "short") is not None  # expired, not yet swept: still readable (omit_expired is off)
        assert store.sweep_ttl() == 1
        assert store.get(("t",), "short") is None
        assert {item.key for item in store.search(("t",))} == {"long", "forever"}
        clock.advance(600)
        assert store.sweep_ttl() == 1
        assert [item.key for item in store.search(("t",))] == ["forever"]

    def test_ttl_refresh_on_read(self, opened: Opener, clock: ManualClock) -> None:
        store = opened(ttl={"refresh_on_read": True}, clock=clock)
        store.put(("t",), "read", {"v": 1}, ttl=TTL_MINUTES)
        store.put(("t",), "searched", {"v": 2}, ttl=TTL_MINUTES)
        store.put(("t",), "unread", {"v": 3}, ttl=TTL_MINUTES)
        store.put(("t",), "peeked", {"v": 4}, ttl=TTL_MINUTES)
        clock.advance(40)
        assert store.get(("t",), "read") is not None  # refreshes: expires 60 s from now
        assert store.get(("t",), "peeked", refresh_ttl=False) is not None
        assert [item.key for item in store.search(("t",), filter={"v": 2})] == ["searched"]
        clock.advance(40)  # 80 s after the puts, 40 s after the reads
        assert store.sweep_ttl() == 2
        assert {item.key for item in store.search(("t",), refresh_ttl=False)} == {"read", "searched"}
        clock.advance(61)
        assert store.sweep_ttl() == 2

    def test_ttl_default_and_omit_expired(self, opened: Opener, clock: ManualClock) -> None:
        store = opened(ttl={"default_ttl": TTL_MINUTES, "omit_expired": True, "refresh_on_read": False}, clock=clock)
        store.put(("t",), "defaulted", {"v": 1})
        store.put(("t",), "longer", {"v": 2}, ttl=5 * TTL_MINUTES)
        clock.advance(61)
        assert store.get(("t",), "defaulted") is None  # expired: hidden before any sweep
        assert [item.key for item in store.search(("t",))] == ["longer"]
        assert store.sweep_ttl() == 1

    def test_ttl_sweeper_thread(self, opened: Opener, clock: ManualClock) -> None:
        store = opened(ttl={"refresh_on_read": False}, clock=clock)
        store.put(("t",), "short", {"v": 1}, ttl=TTL_MINUTES)
        clock.advance(61)
        store.start_ttl_sweeper(sweep_interval_minutes=0.05 / 60)  # every 50 ms of real time
        try:
            for _ in range(200):
                if store.get(("t",), "short") is None:
                    break
                time.sleep(0.05)
            assert store.get(("t",), "short") is None
        finally:
            assert store.stop_ttl_sweeper(timeout=10)

    # vector index

    def test_vector_search_ranks_by_cosine(self, vector_store: BaseStore) -> None:
        texts = {"py": "python tutorial for beginners", "ts": "typescript guide", "cook": "cooking pasta at home"}
        for key, text in texts.items():
            vector_store.put(("docs",), key, {"text": text})
        vector_store.put(("docs",), "plain", {"text": "python tutorial"}, index=False)
        query = "python tutorial"
        results = vector_store.search(("docs",), query=query, limit=10)
        scored = [item for item in results if item.score is not None]
        scores = [item.score for item in scored if item.score is not None]
        assert scored[0].key == "py"
        assert scores == sorted(scores, reverse=True)
        (wanted,) = embed_words([query])
        for item in scored:
            assert item.score == pytest.approx(cosine(wanted, embed_words([texts[item.key]])[0]), abs=1e-5)
        assert {item.key for item in results} == {"py", "ts", "cook", "plain"}
        assert next(item for item in results if item.key == "plain").score is None  # not indexed: found, not scored

    def test_vector_search_with_filter_fields_and_updates(self, vector_store: BaseStore) -> None:
        vector_store.put(("docs",), "a", {"text": "red apples", "other": "green", "lang": "en"})
        vector_store.put(("docs",), "b", {"text": "green grass", "lang": "en"})
        vector_store.put(("docs",), "c", {"text": "green tea", "lang": "fr"})
        vector_store.put(("docs",), "d", {"text": "blue sky", "other": "green grass"}, index=["other"])
        top = vector_store.search(("docs",), query="green grass", filter={"lang": "en"}, limit=1)
        assert [item.key for item in top] == ["b"]
        assert vector_store.search(("docs",), query="green grass", limit=2)[0].score == pytest.approx(1.0, abs=1e-5)
        vector_store.put(("docs",), "b", {"text": "ripe bananas", "lang": "en"})  # re-embedded on update
        assert vector_store.search(("docs",), query="ripe bananas", limit=1)[0].key == "b"

    def test_vector_search_with_async_embed(self, opened: Opener) -> None:
        if not self.supports_vector:
            pytest.skip(f"{type(self).__name__}: no vector index here")
        store = opened(index={"dims": DIMS, "embed": aembed_words, "fields": ["text"]})

        async def scenario() -> list[str]:
            await store.aput(("docs",), "a", {"text": "alpha beta"})
            await store.aput(("docs",), "b", {"text": "gamma delta"})
            return [item.key for item in await store.asearch(("docs",), query="gamma delta", limit=2)]

        assert asyncio.run(scenario())[0] == "b"
