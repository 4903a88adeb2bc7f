"""A run's heads, kept per run and updated with the checkpoints committed since the last look, so a page of a run
with 100,000 checkpoints reads its new manifests only, not every one (benchmarks: ui run page)."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import agentfs


@dataclass
class _Known:
    ids: list[str] = field(default_factory=list)
    parents: set[str] = field(default_factory=set)


class Heads:
    def __init__(self, store: agentfs.Store) -> None:
        self.store = store
        self._known: dict[str, _Known] = {}
        self._lock = threading.Lock()

    def of(self, run: str, ids: list[str]) -> list[str]:
        """The ids among `ids` (the run's, oldest first) that no checkpoint of the run names as parent."""
        with self._lock:
            known = self._known.get(run)
        if known is None or ids[: len(known.ids)] != known.ids:  # first look, or a prune removed some: start over
            known = _Known()
        new = ids[len(known.ids) :]
        parents = set(known.parents)
        for checkpoint_id in new:
            try:
                parent = self.store.run(run).get(checkpoint_id).parent
            except agentfs.AgentFSError:  # damaged or pruned meanwhile: it names no parent
                continue
            if parent is not None:
                parents.add(parent)
        with self._lock:
            self._known[run] = _Known(list(ids), parents)
        return [checkpoint_id for checkpoint_id in ids if checkpoint_id not in parents]
