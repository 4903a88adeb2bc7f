"""A run's heads, kept per run and updated with the checkpoints committed since the last look, so a page of a run
with 100,000 checkpoints reads its new manifests only, not every one (benchmarks: workload 16, run page).

Hazard: ids are sorted, and a pull can insert an older id anywhere, or a prune remove some; the cache is reused only
when the run's first id and the id at the last known count are unchanged (then every id up to there is, but for
an insertion and a removal that exactly balance before it, which only a pull racing a prune could make: the next
change of either reloads). tests/test_ui_pages.py::test_heads_follow_new_commits_and_a_pulled_divergence.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import agentfs


@dataclass
class _Known:
    count: int = 0
    first: str | None = None
    last: str | None = None
    heads: list[str] = field(default_factory=list)
    parents: set[str] = field(default_factory=set)


class Heads:
    def __init__(self, store: agentfs.Store) -> None:
        self.store = store
        self._known: dict[str, _Known] = {}
        self._locks: dict[str, threading.Lock] = {}  # one per run: a long first look at one run holds up no other
        self._lock = threading.Lock()  # guards _locks

    def warm(self) -> threading.Thread:
        """Look at every run once, in a daemon thread, so that the first page of a long run is not the first look
        (100,000 manifests take tens of seconds). Stops quietly when the store is closed under it."""

        def look() -> None:
            try:
                for run in self.store.runs():
                    if run not in self._known:  # a page got there first
                        self.of(run, self.store.ids(run))
            except (agentfs.AgentFSError, OSError, ValueError):
                return

        thread = threading.Thread(target=look, name="agentfs-ui-heads", daemon=True)
        thread.start()
        return thread

    def of(self, run: str, ids: list[str]) -> list[str]:
        """The ids among `ids` (the run's, oldest first) that no checkpoint of the run names as parent."""
        with self._lock:
            lock = self._locks.setdefault(run, threading.Lock())
        with lock:
            known = self._known.get(run)
            reusable = known is not None and 0 < known.count <= len(ids) and ids[0] == known.first and ids[known.count - 1] == known.last
            if not reusable or known is None:
                known = _Known()
            new = ids[known.count :]
            for checkpoint_id in new:
                parent = self._parent(run, checkpoint_id)
                if parent is not None:
                    known.parents.add(parent)
            known.heads = [checkpoint_id for checkpoint_id in [*known.heads, *new] if checkpoint_id not in known.parents]
            known.count, known.first, known.last = len(ids), ids[0] if ids else None, ids[-1] if ids else None
            self._known[run] = known
            return list(known.heads)

    def _parent(self, run: str, checkpoint_id: str) -> str | None:
        try:
            return self.store.read_entry(run, checkpoint_id).manifest.parent
        except agentfs.AgentFSError:  # damaged, or pruned since it was listed: it names no parent
            return None
