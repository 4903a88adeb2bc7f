"""AgentFSStore's view of its namespaces: each one's run, and the records of its head, decoded once per head.

A head's records are also kept newest first (by their `updated` time, ties in the order the head
holds them), so a search without a query merges the namespaces' lists and reads only as far as
its page goes, instead of sorting every item of every namespace.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from ... import FormatError, Store
from .store_layout import Namespace, namespace_run, parse_namespace_run

CACHED_HEADS = 1024
Record = dict[str, Any]  # value, created, updated (ns since the epoch), ttl (minutes or None), expires (ns or None), vectors
Records = dict[str, Record]
Found = tuple[Namespace, str, Record]  # an item as a search finds it


class NamespaceHeads:
    """The namespaces of the runs under `prefix` and their heads' records; safe to share between threads."""

    def __init__(self, store: Store, prefix: str) -> None:
        self.store = store
        self.prefix = prefix
        self._heads: OrderedDict[str, tuple[str, Records]] = OrderedDict()
        self._newest: OrderedDict[str, tuple[str, list[Found]]] = OrderedDict()
        self._parsed: dict[str, Namespace | None] = {}  # run name -> the namespace it holds, None for other runs
        self._lock = threading.Lock()

    def run_name(self, ns: Namespace) -> str:
        return namespace_run(self.prefix, ns)

    def namespaces(self) -> dict[Namespace, str]:
        """Every namespace that has a run (even an emptied one), to its run."""
        found = {}
        for run in self.store.runs():
            if run not in self._parsed:  # a run's name never changes what it holds: parse it once
                parsed = parse_namespace_run(self.prefix, run)
                self._parsed[run] = self._recorded_namespace(run) if parsed is True else parsed or None
            ns = self._parsed[run]
            if ns is not None:
                found[ns] = run
        return found

    def _recorded_namespace(self, run: str) -> Namespace:
        recorded = self._head_metadata(run).get("namespace")
        labels = tuple(recorded) if isinstance(recorded, list) and all(isinstance(label, str) for label in recorded) else ()
        if not labels or self.run_name(labels) != run:
            raise FormatError(f"run {run!r} does not record the namespace its name stands for")
        return labels

    def _head_metadata(self, run: str) -> dict[str, Any]:
        latest = self.store.run(run).latest()
        return latest.metadata if latest is not None else {}

    def holds_items(self, run: str) -> bool:
        count = self._head_metadata(run).get("items")
        return not isinstance(count, int) or count > 0

    def records(self, run: str, head: str | None = None) -> Records:
        """The records of `run`'s head (`head` if given: already looked up); cached per head id."""
        head = self.store.run(run).head_id() if head is None else head
        if head is None:
            return {}
        with self._lock:
            cached = self._heads.get(run)
            if cached is not None and cached[0] == head:
                self._heads.move_to_end(run)
                return cached[1]
        records = self.store.run(run).get(head).state
        if not isinstance(records, dict):
            raise FormatError(f"{run}@{head} holds a {type(records).__name__}, not a store namespace's items")
        self.remember(run, head, records)
        return records

    def remember(self, run: str, head: str, records: Records) -> None:
        _keep(self._heads, self._lock, run, (head, records))

    def newest_first(self, ns: Namespace, run: str) -> list[Found]:
        """The head's items, the most recently updated first; cached per head id."""
        head = self.store.run(run).head_id()
        if head is None:
            return []
        with self._lock:
            cached = self._newest.get(run)
            if cached is not None and cached[0] == head:
                self._newest.move_to_end(run)
                return cached[1]
        found = sorted(((ns, key, record) for key, record in self.records(run, head).items()), key=updated_last)
        _keep(self._newest, self._lock, run, (head, found))
        return found


def updated_last(found: Found) -> int:
    """A sort key that puts the most recently updated item first."""
    return -int(found[2]["updated"])


def _keep(cache: OrderedDict[str, Any], lock: threading.Lock, run: str, value: Any) -> None:
    with lock:
        cache[run] = value
        cache.move_to_end(run)
        if len(cache) > CACHED_HEADS:
            cache.popitem(last=False)
