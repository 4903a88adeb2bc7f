"""A run's heads, kept per run and updated with the checkpoints committed since the last look, so a page of a run
with 100,000 checkpoints reads its new manifests only, not every one (benchmarks: workload 17, run page). A look
asks the engine for two small slices of the run's ids (Run.id_slice), not for all of them. The first look asks the
engine for the run's heads (Run.heads), which its sealed segments' lineage records answer without the manifests
(benchmarks: workload 17, run page cold).

Hazard: ids are sorted, and a pull can insert an older id anywhere, or a prune remove some; the cache is reused only
when the run's first id and the id at the last known count are unchanged (then every id up to there is, but for
an insertion and a removal that exactly balance before it, which only a pull racing a prune could make: the next
change of either reloads). tests/ui/test_ui_pages.py::test_heads_follow_new_commits_and_a_pulled_divergence."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import agentfs

FIRST_LOOK_READS = 8  # checkpoints: a run this short has its manifests read, cheaper than Run.heads (another listing)


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
        (a run whose entries no lineage record covers reads every manifest). Stops quietly when the store is closed under it."""

        def look() -> None:
            try:
                for run in self.store.runs():
                    if run not in self._known:  # a page got there first
                        self.of(run)
            except (agentfs.AgentFSError, OSError, ValueError):
                return

        thread = threading.Thread(target=look, name="agentfs-ui-heads", daemon=True)
        thread.start()
        return thread

    def of(self, run: str) -> list[str]:
        """The run's ids (oldest first) where a line ends, as engine/lineage.py `heads` defines them: no checkpoint of
        the run names them as parent, and, but for the newest, they are newer than every checkpoint retention removed."""
        with self._lock:
            lock = self._locks.setdefault(run, threading.Lock())
        with lock:
            known = self._known.get(run)
            new = None
            if known is not None and known.count:
                first = self.store.run(run).id_slice(0, 1)
                tail = self.store.run(run).id_slice(known.count - 1)
                if first.ids == [known.first] and tail.ids[:1] == [known.last]:
                    new = tail.ids[1:]
            if known is None or new is None:
                known, new = self._first_look(run)
            try:
                named = list(self.store.run(run).parents(new).values())
            except agentfs.AgentFSError:  # one entry could not be read in the sweep: each is read alone
                named = [self._parent(run, checkpoint_id) for checkpoint_id in new]
            known.parents.update(parent for parent in named if parent is not None)
            known.heads = [checkpoint_id for checkpoint_id in dict.fromkeys([*known.heads, *new]) if checkpoint_id not in known.parents]
            if new:
                known.count, known.last = known.count + len(new), new[-1]
                known.first = known.first or new[0]
            self._known[run] = known
            if len(known.heads) < 2:
                return list(known.heads)
            newest_retired = max(self.store.run(run).retired(), default="")
            return [leaf for leaf in known.heads[:-1] if leaf > newest_retired] + known.heads[-1:]

    def _first_look(self, run: str) -> tuple[_Known, list[str]]:
        """What is known of the run before its first look, and its ids whose manifests the look reads: all of a short
        run's; none of a longer one's, whose heads the engine gives (Run.heads: its lineage records, so not every
        manifest), with where its ids stood just before (a checkpoint committed in between is new at the next look:
        its parent is read then, and it is not listed twice)."""
        ids = self.store.run(run).ids()
        if len(ids) <= FIRST_LOOK_READS:
            return _Known(), ids
        heads = self.store.run(run).heads()
        return _Known(len(ids), ids[0], ids[-1], heads), []

    def _parent(self, run: str, checkpoint_id: str) -> str | None:
        try:
            return self.store.run(run).get(checkpoint_id).parent
        except agentfs.AgentFSError:  # damaged, or pruned since it was listed: it names no parent
            return None
