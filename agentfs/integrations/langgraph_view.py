"""What one LangGraph saver call sees of a store: one look at its segments, then every head and id list from it.

A call reads several runs (the thread's ctl run, a namespace's checkpoints and late runs); asking the
store for each head or id list would look at segments/ each time (a listing and a read of every
unsealed segment's tail). A view looks once, when it is made: every append acknowledged before the
call started, by any process, is in that look, and what this process appends later is indexed as it
appends. A store with a remote is asked each time instead (its heads are on the remote).

A view made with `look=False` takes no look: it answers as of this process's last one. The saver's appends after
its own head use it (one look per commit, the commit's own under the run lock, instead of two) and then check,
from the commit's look, that the thread's generation did not change meanwhile (Generations.still_current).
"""

from __future__ import annotations

from ..api import Store
from ..format.keys import RETIRED_RECORDS


class StoreView:
    """`store` as of one look at its segments, taken when the view is made, or a later one (by another call)."""

    def __init__(self, store: Store, *, look: bool = True) -> None:
        """`look=False`: as of this process's last look (a local store's), for a caller that checks afterwards that
        what it chose still holds (`still_head`)."""
        self.store = store
        self._local = store.remote is None
        if self._local and look:  # store.engine: one look at the segments, then lookups without one (module docstring)
            store.engine.refresh_index()

    def still_head(self, run: str, head: str | None) -> bool:
        """Whether `run`'s head is `head` as of this process's last look (local stores; a remote's is asked now)."""
        return self.head(run) == head

    def head(self, run: str) -> str | None:
        return self.store.engine.known_head(run) if self._local else self.store.engine.head(run)

    def ids(self, run: str) -> list[str]:
        return self.store.engine.known_ids(run) if self._local else self.store.engine.ids(run)

    def retires(self, run: str) -> bool:
        """Whether retention removed any of the run's checkpoints (the run holds a retirement record)."""
        if self._local:
            return bool(self.store.engine.known_record_ids(run, RETIRED_RECORDS))
        return bool(self.store.engine.retirements(run))
