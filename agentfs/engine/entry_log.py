"""The log entries an index adds, in the order it reads them, for followers (engine/notify.py).

A watcher used to list every entry of the store after each hint and subtract what it had seen, so
one commit cost a watcher (and a sync daemon running on-checkpoint hooks) time in proportion to the
store's history. The index now tells a follower what it added since the follower last asked:
(run, id) of each log entry read from an unsealed segment, and each sealed segment's footer found
after the follower started (its entries are expanded only then). Nothing is kept while nobody
follows, and what every follower has taken is dropped. A rebuild (compaction replaced segments)
resets the log: each follower is told to list everything once.
"""

from __future__ import annotations

import itertools
import threading

from ..format import kinds
from ..format import segment as fmt
from ..format.refs import EntryAddress


class EntryLog:
    """What an index added for its followers; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: list[EntryAddress | fmt.Footer] = []
        self._base = 0  # the position of _items[0] in everything ever logged
        self._marks: dict[int, int | None] = {}  # follower -> position it has read to; None: relist
        self._tokens = itertools.count()

    def follow(self) -> int:
        """A token that takes what is added from now on."""
        with self._lock:
            token = next(self._tokens)
            self._marks[token] = self._base + len(self._items)
            return token

    def unfollow(self, token: int) -> None:
        with self._lock:
            self._marks.pop(token, None)
            self._trim()

    @property
    def followed(self) -> bool:
        return bool(self._marks)

    def add(self, item: EntryAddress | fmt.Footer) -> None:
        if self._marks:
            with self._lock:
                self._items.append(item)

    def reset(self) -> None:
        """Everything was indexed again: each follower lists everything at its next take."""
        with self._lock:
            self._base += len(self._items)
            self._items.clear()
            for token in self._marks:
                self._marks[token] = None

    def take(self, token: int) -> list[EntryAddress] | None:
        """(run, id) of what was added since the token's last take; None if it must list everything."""
        with self._lock:
            if token not in self._marks:
                return []  # unfollowed (its watcher closed meanwhile)
            mark = self._marks[token]
            end = self._base + len(self._items)
            self._marks[token] = end
            items = None if mark is None else self._items[mark - self._base :]
            self._trim()
        if items is None:
            return None
        found: list[EntryAddress] = []
        for item in items:
            if isinstance(item, fmt.Footer):
                found += [(run, record_id) for kind, run in item.runs if kind == kinds.ENTRY for record_id in item.ids(kind, run)]
            else:
                found.append(item)
        return found

    def _trim(self) -> None:
        marks = [mark for mark in self._marks.values() if mark is not None]
        keep_from = min(marks, default=self._base + len(self._items))
        if keep_from > self._base:
            del self._items[: keep_from - self._base]
            self._base = keep_from
