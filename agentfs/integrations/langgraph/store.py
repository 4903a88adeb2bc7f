"""AgentFSStore: LangGraph long-term memory (a `BaseStore`) kept in an agentfs store.

- Runs: one run per namespace, `<prefix>/<label>/.../items`, each label encoded as in ../langgraph_layout.py (a
  name that would pass agentfs's length limit is `<prefix>/h<sha256>/items` instead); every commit's
  metadata records the namespace and its item count, so a hashed name is read back and an emptied
  namespace is skipped without decoding its items.
- State: the head commit of a namespace's run maps each key to its record (value, created and
  updated times, ttl, expiry, embedding vectors). agentfs stores a state key by key and reuses an
  unchanged key's object from the head, so a put writes one small object and a manifest; its CPU
  cost is encoding the namespace's records again, O(items in the namespace), not O(history). Every
  version stays in the run's history until retention prunes it.
- Reads take each namespace's head (one lookup per namespace, never a walk of history); decoded
  heads are cached per (run, head id), so repeated searches decode nothing new (see store_heads.py:
  a search without a query reads the namespaces newest first only as far as its page goes).
- Writers: a batch commits each namespace it changes once, with `parent=` the head it read, and
  retries on `Conflict`: processes and machines writing one namespace interleave without losing items.
- TTL (minutes, as LangGraph counts): a record's expiry is `clock()` + ttl; a read that refreshes
  it commits the new expiry; `sweep_ttl()` commits each namespace without its expired records.
- Vectors: computed at put time with the index's `embed` (sync in `batch`, async in `abatch`),
  stored with the record as float32 so they sync with it; search ranks by cosine similarity (numpy).

Hazard: a refreshing read (the default when an item has a ttl) is a durable commit, not a read.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import copy
import functools
import heapq
import itertools
import os
import random
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from datetime import datetime, timezone
from typing import Any, Literal, NamedTuple

import numpy as np
from langgraph.store.base import (
    BaseStore,
    GetOp,
    IndexConfig,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
    ensure_embeddings,
    validate_op_namespace,
)

from ... import Conflict, Store
from ... import open as open_agentfs
from ...api import EncryptionArg
from ...names import check_name
from .store_heads import Found, NamespaceHeads, Record, Records, updated_last
from .store_layout import Namespace
from .store_query import StoreError, Vectors, as_vector, best_scores, check_filter, matches_conditions, matches_filter, texts_to_embed
from .store_sweeper import Sweeper

ATTEMPTS = 32
NS_PER_MINUTE = 60_000_000_000
Clock = Callable[[], float]


class Changes(NamedTuple):
    """What a batch changes in one namespace."""

    puts: dict[str, PutOp]  # by key; a None value deletes
    refresh: set[str]  # keys whose expiry a read refreshed
    vectors: dict[tuple[Namespace, str], Vectors]  # the batch's embeddings
    now: int  # ns since the epoch by the store's clock


class Embedded(NamedTuple):
    """What a batch needs embedded before it runs: the texts of its puts and its search queries."""

    texts: list[tuple[Namespace, str, str, str]]  # namespace, key, field path, text
    queries: list[str]


class AgentFSStore(BaseStore):
    """LangGraph's `BaseStore` over agentfs: durable, versioned items that sync to any remote with the store.

    `store` is an open `agentfs.Store` or a path (opened with `remote`, `storage_options`,
    `durability` and `encryption` as in `agentfs.open`). `index={"dims": N, "embed": fn, "fields": [...]}` enables
    vector search; `ttl=TTLConfig(...)` sets defaults; `clock` (seconds since the epoch) stamps
    times and expiries.
    """

    supports_ttl = True

    def __init__(
        self,
        store: Store | str | os.PathLike[str],
        *,
        index: IndexConfig | None = None,
        ttl: TTLConfig | None = None,
        prefix: str = "store",
        remote: str | None = None,
        storage_options: dict[str, Any] | None = None,
        durability: Literal["power", "process"] = "power",
        clock: Clock = time.time,
        encryption: EncryptionArg = None,
    ) -> None:
        self._owns_store = not isinstance(store, Store)
        if isinstance(store, Store):
            if remote is not None or storage_options is not None or encryption is not None:
                raise ValueError("remote, storage_options and encryption apply only when AgentFSStore opens the store")
            self.store = store
        else:
            self.store = open_agentfs(store, remote=remote, storage_options=storage_options, durability=durability, encryption=encryption)
        self.prefix = check_name(prefix, "run prefix")
        self.ttl_config = ttl
        self.clock = clock
        self.index_config = index
        self.embeddings = None
        self._fields: list[str] = []
        self._dims = 0
        if index is not None:
            if not isinstance(index.get("dims"), int) or index.get("embed") is None:
                raise StoreError(f"index needs an int 'dims' and an 'embed' function or Embeddings, got keys {sorted(index)}")
            self.embeddings = ensure_embeddings(index["embed"])
            self._dims = index["dims"]
            self._fields = list(index.get("fields") or ["$"])
        self.heads = NamespaceHeads(self.store, self.prefix)
        self._sweeper = Sweeper(self.sweep_ttl, str(self.store))

    def __enter__(self) -> AgentFSStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the TTL sweeper; close the agentfs store if this object opened it."""
        self.stop_ttl_sweeper()
        if self._owns_store:
            self.store.close()

    def sync(self, url: str, storage_options: dict[str, Any] | None = None, **options: Any) -> Any:
        """`Store.sync`: a daemon that pushes every commit (items included) to `url`."""
        return self.store.sync(url, storage_options, **options)

    # batches

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        wanted = self._prepare(ops)
        queries: dict[str, list[float]] = {}
        documents: list[list[float]] = []
        if self.embeddings is not None:
            queries = {query: self.embeddings.embed_query(query) for query in wanted.queries}
            documents = self.embeddings.embed_documents([text for *_, text in wanted.texts]) if wanted.texts else []
        return self._execute(ops, wanted, queries, documents)

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        wanted = self._prepare(ops)
        queries: dict[str, list[float]] = {}
        documents: list[list[float]] = []
        if self.embeddings is not None:
            answers = await asyncio.gather(*(self.embeddings.aembed_query(query) for query in wanted.queries))
            queries = dict(zip(wanted.queries, answers, strict=True))
            documents = await self.embeddings.aembed_documents([text for *_, text in wanted.texts]) if wanted.texts else []
        return await asyncio.to_thread(self._execute, ops, wanted, queries, documents)

    def _prepare(self, ops: list[Op]) -> Embedded:
        """Check every op before any runs, and gather what the batch needs embedded."""
        for op in ops:
            validate_op_namespace(op)
            if not isinstance(op, (GetOp, PutOp, SearchOp, ListNamespacesOp)):
                raise StoreError(f"unknown store operation {type(op).__name__}")
            if isinstance(op, SearchOp):
                check_filter(op.filter)
        if self.embeddings is None:
            return Embedded([], [])
        puts = {(op.namespace, op.key): op for op in ops if isinstance(op, PutOp)}  # the last put of a key wins
        texts = [(ns, key, path, text) for (ns, key), op in puts.items() for path, text in texts_to_embed(op, self._fields)]
        queries = sorted({op.query for op in ops if isinstance(op, SearchOp) and op.query})
        return Embedded(texts, queries)

    def _execute(self, ops: list[Op], wanted: Embedded, queries: dict[str, list[float]], documents: list[list[float]]) -> list[Result]:
        """Reads first, against the heads as they are; then one commit per namespace the batch changes."""
        if len(documents) != len(wanted.texts):
            raise StoreError(f"the embed function returned {len(documents)} embeddings for {len(wanted.texts)} texts")
        vectors: dict[tuple[Namespace, str], Vectors] = defaultdict(dict)
        for (ns, key, path, _text), embedding in zip(wanted.texts, documents, strict=True):
            vectors[(ns, key)][path] = as_vector(embedding, self._dims, f"namespace {ns} key {key!r} field {path!r}")
        now = self._now()
        refresh: dict[Namespace, set[str]] = defaultdict(set)
        puts: dict[Namespace, dict[str, PutOp]] = defaultdict(dict)
        results: list[Result] = []
        for op in ops:
            if isinstance(op, GetOp):
                results.append(self._get(op, now, refresh))
            elif isinstance(op, SearchOp):
                query = queries.get(op.query) if op.query else None
                query_vector = None if query is None else as_vector(query, self._dims, f"query {op.query!r}")
                results.append(self._search(op, query_vector, now, refresh))
            elif isinstance(op, ListNamespacesOp):
                results.append(self._list_namespaces(op))
            else:
                puts[op.namespace][op.key] = op
                results.append(None)
        for ns in puts.keys() | refresh.keys():
            changes = Changes(puts.get(ns, {}), refresh.get(ns, set()), vectors, now)
            self._update(ns, functools.partial(self._apply, ns, changes))
        return results

    # reading

    def _get(self, op: GetOp, now: int, refresh: dict[Namespace, set[str]]) -> Item | None:
        record = self.heads.records(self.heads.run_name(op.namespace)).get(op.key)
        if record is None or self._omitted(record, now):
            return None
        if op.refresh_ttl and record["ttl"] is not None:
            refresh[op.namespace].add(op.key)
        return Item(
            value=copy.deepcopy(record["value"]),
            key=op.key,
            namespace=op.namespace,
            created_at=_time(record["created"]),
            updated_at=_time(record["updated"]),
        )

    def _search(self, op: SearchOp, query: np.ndarray | None, now: int, refresh: dict[Namespace, set[str]]) -> list[SearchItem]:
        prefix = tuple(op.namespace_prefix)
        runs = [(ns, run) for ns, run in sorted(self.heads.namespaces().items()) if ns[: len(prefix)] == prefix]
        if query is None:  # newest first: heapq.merge keeps ties in namespace order, as one stable sort of them all would
            newest = heapq.merge(*(self.heads.newest_first(ns, run) for ns, run in runs), key=updated_last)
            kept = (found for found in newest if self._wanted(found[2], op, now))
            page: list[tuple[Found, float | None]] = [(found, None) for found in itertools.islice(kept, op.offset, op.offset + op.limit)]
        else:
            candidates = [
                (ns, key, record) for ns, run in runs for key, record in self.heads.records(run).items() if self._wanted(record, op, now)
            ]
            scores = best_scores(query, [record["vectors"] for _, _, record in candidates])
            order = sorted(range(len(candidates)), key=lambda i: (scores[i] is None, -(scores[i] or 0.0), -candidates[i][2]["updated"]))
            page = [(candidates[i], scores[i]) for i in order[op.offset : op.offset + op.limit]]
        results = []
        for (ns, key, record), score in page:
            if op.refresh_ttl and record["ttl"] is not None:
                refresh[ns].add(key)
            results.append(
                SearchItem(
                    namespace=ns,
                    key=key,
                    value=copy.deepcopy(record["value"]),
                    created_at=_time(record["created"]),
                    updated_at=_time(record["updated"]),
                    score=score,
                )
            )
        return results

    def _wanted(self, record: Record, op: SearchOp, now: int) -> bool:
        return not self._omitted(record, now) and matches_filter(record["value"], op.filter)

    def _list_namespaces(self, op: ListNamespacesOp) -> list[Namespace]:
        listed = {
            ns if op.max_depth is None else ns[: op.max_depth]
            for ns, run in self.heads.namespaces().items()
            if matches_conditions(ns, op.match_conditions or ()) and self.heads.holds_items(run)
        }
        return sorted(listed)[op.offset : op.offset + op.limit]

    def _omitted(self, record: Record, now: int) -> bool:
        omit = bool(self.ttl_config and self.ttl_config.get("omit_expired"))
        return omit and record["expires"] is not None and record["expires"] <= now

    # TTL

    def sweep_ttl(self) -> int:
        """Delete every expired item (one commit per namespace that had some); returns how many."""
        now = self._now()
        swept = 0
        for ns in self.heads.namespaces():
            expired: list[str] = []

            def without_expired(records: Records, expired: list[str] = expired) -> Records | None:
                expired[:] = [key for key, record in records.items() if record["expires"] is not None and record["expires"] <= now]
                return {key: record for key, record in records.items() if key not in expired} if expired else None

            self._update(ns, without_expired)
            swept += len(expired)
        return swept

    def start_ttl_sweeper(self, sweep_interval_minutes: float | None = None) -> concurrent.futures.Future[None]:
        """Sweep every `sweep_interval_minutes` (default: the TTL config's, else 5) on a thread until stopped."""
        minutes = sweep_interval_minutes or (self.ttl_config or {}).get("sweep_interval_minutes") or 5
        return self._sweeper.start(60.0 * float(minutes))

    def stop_ttl_sweeper(self, timeout: float | None = None) -> bool:
        """Stop the sweeper; False if it was still sweeping after `timeout` seconds."""
        return self._sweeper.stop(timeout)

    # writing

    def _apply(self, ns: Namespace, changes: Changes, records: Records) -> Records | None:
        """`records` with the batch's puts and TTL refreshes applied; None if that changes nothing."""
        puts, refresh, vectors, now = changes
        updated = dict(records)
        changed = False
        for key, op in puts.items():
            if op.value is None:
                changed = updated.pop(key, None) is not None or changed
                continue
            old = records.get(key)
            updated[key] = {
                "value": dict(op.value),
                "created": old["created"] if old is not None else now,
                "updated": now,
                "ttl": op.ttl,
                "expires": None if op.ttl is None else now + round(op.ttl * NS_PER_MINUTE),
                "vectors": vectors.get((ns, key), {}),
            }
            changed = True
        for key in refresh - puts.keys():
            record = updated.get(key)
            if record is not None and record["ttl"] is not None:
                updated[key] = {**record, "expires": now + round(record["ttl"] * NS_PER_MINUTE)}
                changed = True
        return updated if changed else None

    def _update(self, ns: Namespace, change: Callable[[Records], Records | None]) -> None:
        """Commit `change(head records)` on the namespace's head, again on a newer head if another writer came first."""
        run = self.store.run(self.heads.run_name(ns))
        for attempt in range(ATTEMPTS):
            head = run.head_id()
            updated = change(self.heads.records(run.name, head))
            if updated is None:
                return
            try:
                commit = run.commit(updated, metadata={"namespace": list(ns), "items": len(updated)}, parent=head)
            except Conflict:
                time.sleep(random.uniform(0, 0.001 * (attempt + 1)))  # spread racing writers apart
                continue
            self.heads.remember(run.name, commit.id, updated)
            return
        raise Conflict(f"namespace {ns}: lost {ATTEMPTS} races with other writers of {run.name!r}")

    def _now(self) -> int:
        return round(self.clock() * 1e9)


def _time(ns: int) -> datetime:
    return datetime.fromtimestamp(ns / 1e9, tz=timezone.utc)
