"""An agent's messages as the latest checkpoint of each message id in its messages run (see layout.py).

Reading them walks the run's checkpoints once; after that, a reader that saw the head reads only the
checkpoints appended since (by this process or another writer), and a message this process commits
right after the head it knew extends what it knew without a read. Hazard: the run's checkpoints are
the messages, so pruning the run (keep_last, keep_within) drops old messages; the store-wide
retention policy skips runs under `strands/` (retention.MANAGED_PREFIXES; test_strands.py,
test_a_store_wide_retention_policy_keeps_every_message), so a repository with another `prefix` on a
store with a policy loses them.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, NamedTuple

import agentfs

from .layout import MESSAGE, stored

RECENT_LOGS = 32  # message runs whose messages are kept as last read or written here


class Log(NamedTuple):
    """The messages of a run as of its checkpoint `head`: message id -> SessionMessage.to_dict(). Hazard:
    shared between callers and never changed (a message committed later is added to a copy); readers build
    Strands objects from it with from_dict, which copies."""

    head: str
    records: dict[int, Any]


class _Kept:
    """A run's messages as of `head`, under MessageLogs' lock. `records` is added to in place while no Log holds it
    (`lent` False), so a message committed after the head costs one item, not a copy of the conversation (a copy
    each grew a 4,000-message session's commits by 50 us; tests_strands/test_strands.py, a reader's Log unchanged)."""

    __slots__ = ("head", "lent", "records")

    def __init__(self, head: str, records: dict[int, Any], lent: bool) -> None:
        self.head, self.records, self.lent = head, records, lent


class MessageLogs:
    def __init__(self, store: agentfs.Store) -> None:
        self.store = store
        self._logs: OrderedDict[str, _Kept] = OrderedDict()
        self._lock = threading.Lock()

    def current(self, run_name: str) -> Log | None:
        """The run's messages now; None if it has none."""
        run = self.store.run(run_name)
        head = run.head_id()
        if head is None:
            return None
        known: Log | None = None
        with self._lock:
            kept = self._logs.get(run_name)
            if kept is not None:
                kept.lent = True  # read below or by the caller, outside the lock
                known = Log(kept.head, kept.records)
        if known is not None and known.head == head:
            return known
        ids = run.ids()
        records: dict[int, Any] = {}
        start = 0
        if known is not None and known.head in ids:  # read only what was appended since
            start = ids.index(known.head) + 1
            records = dict(known.records)
        for checkpoint in run.get_many(ids[start:]):  # one sweep of the run's entries, not a lookup each
            record = stored(checkpoint, (MESSAGE,))[MESSAGE]
            if not (isinstance(record, dict) and isinstance(record.get("message_id"), int)):
                raise agentfs.FormatError(f"checkpoint {checkpoint.id} of run {run_name!r} is not a Strands message")
            records[record["message_id"]] = record
        log = Log(ids[-1], records)
        self._keep(run_name, _Kept(log.head, records, lent=True))
        return log

    def committed(self, run_name: str, checkpoint: agentfs.Checkpoint, record: dict[str, Any]) -> None:
        """After this process committed `record` as `checkpoint`: what it knew, extended if the commit went right after
        it (what it knew is the messages as of the commit's parent then), else forgotten."""
        with self._lock:
            kept = self._logs.get(run_name)
            if kept is not None and checkpoint.parent is not None and kept.head == checkpoint.parent:
                if kept.lent:
                    kept.records, kept.lent = dict(kept.records), False
                kept.records[record["message_id"]] = record
                kept.head = checkpoint.id
                self._logs.move_to_end(run_name)
                return
        if checkpoint.parent is None:
            self._keep(run_name, _Kept(checkpoint.id, {record["message_id"]: record}, lent=False))
        else:
            self.forget(run_name)  # not known, or another writer appended between: the next read catches up from the store

    def forget(self, run_name: str) -> None:
        with self._lock:
            self._logs.pop(run_name, None)

    def _keep(self, run_name: str, kept: _Kept) -> None:
        with self._lock:
            self._logs[run_name] = kept
            self._logs.move_to_end(run_name)
            while len(self._logs) > RECENT_LOGS:
                self._logs.popitem(last=False)
