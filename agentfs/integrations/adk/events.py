"""A session's events as its run's checkpoints hold them (see layout.py), read by one sweep and kept per run.

The events as of a checkpoint are those of the newest checkpoint on its line (itself, its parent, and so on)
that holds the whole list, followed by the one event of each checkpoint after it; before a run's first
checkpoint come the events of the checkpoint it was forked from (a fork cut short before its own whole list).
Reading a run sweeps its checkpoints once; after that, a reader that saw the head reads only the checkpoints
appended since (by this service or another writer), and an event this service commits right after the head
it knew extends what it knew without a read.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, NamedTuple

import agentfs

from .layout import EVENT, EVENTS, STATE

RECENT_LOGS = 32  # sessions whose events are kept as last read or written here,
RECENT_EVENTS = 50_000  # and their events in all (about 1.6 KB each as dumped; the newest session's are kept whatever their count)
# runs in a row whose events continue those of the run they were forked from (each a fork cut short before its own
# whole list): read by recursing, so a longer chain (or a cycle, which only crafted bytes make) is refused by name
# instead of ending in RecursionError (test_adk_layouts.py, test_a_chain_of_forks_cut_short_is_refused_past_its_bound)
MAX_FORK_HOPS = 64


class SessionLog(NamedTuple):
    """A session's events (as ADK dumps them) and state as of its checkpoint `head`, and the head's time.

    Hazard: `events` and `positions` are shared by the logs of one line of commits and grow as it does (under
    SessionLogs' lock); this log's events are the first `length`, and an event id is this log's if its position
    is below `length`. Never handed out: readers build ADK events from deep copies of them (test_adk_layouts.py,
    test_what_get_session_returns_is_the_callers_to_change)."""

    head: str
    events: list[dict[str, Any]]
    positions: dict[Any, int]  # event id -> its first position in `events`
    length: int
    state: dict[str, Any]
    updated: float  # the head's last_update_time

    def dumped(self) -> list[dict[str, Any]]:
        return self.events[: self.length]

    def holds(self, event_id: Any) -> bool:
        return self.positions.get(event_id, self.length) < self.length

    def extended(self, head: str, event: dict[str, Any], state: dict[str, Any], updated: float) -> SessionLog:
        """This log with `event` after its own: the shared lists grow when no longer log grew them already."""
        events, positions = self.events, self.positions
        if len(events) != self.length:  # another log of this line holds more: start lists of this one's
            events = events[: self.length]
            positions = {event_id: at for event_id, at in positions.items() if at < self.length}
        events.append(event)
        positions.setdefault(event.get("id"), self.length)
        return SessionLog(head, events, positions, self.length + 1, state, updated)


def new_log(head: str, events: list[dict[str, Any]], state: dict[str, Any], updated: float) -> SessionLog:
    positions: dict[Any, int] = {}
    for at, event in enumerate(events):
        positions.setdefault(event.get("id"), at)
    return SessionLog(head, list(events), positions, len(events), state, updated)


class SessionLogs:
    """The logs of the sessions this service read or wrote last (RECENT_LOGS of them, RECENT_EVENTS events in all)."""

    def __init__(self) -> None:
        self._logs: OrderedDict[str, SessionLog] = OrderedDict()
        self._lock = threading.Lock()  # the service's calls run on the store's pool: one log grows at a time

    def current(self, run: agentfs.Run) -> SessionLog | None:
        """The session's log now; None if the run has no checkpoint."""
        head = run.head_id()
        if head is None:
            return None
        with self._lock:
            known = self._logs.get(run.name)
        if known is not None and known.head == head:
            return known
        log = read_log(run, known)
        self._keep(run.name, log)
        return log

    def committed(
        self,
        run: agentfs.Run,
        before: SessionLog,
        checkpoint: agentfs.Checkpoint,
        event: dict[str, Any],
        state_changed: bool,
        updated: float,
    ) -> None:
        """After this service committed `event` as `checkpoint` right after `before`'s head (the session state
        read back when it changed: as any reader decodes it, a tuple a list)."""
        state = checkpoint.value(STATE) if state_changed else before.state
        with self._lock:
            log = before.extended(checkpoint.id, event, state, updated)
        self._keep(run.name, log)

    def started(self, run: agentfs.Run, checkpoint: agentfs.Checkpoint, events: list[dict[str, Any]], updated: float) -> None:
        """After this service committed the whole list `events` as `checkpoint` (a session's creation, a fork)."""
        self._keep(run.name, new_log(checkpoint.id, events, checkpoint.value(STATE), updated))

    def forget(self, run_name: str) -> None:
        with self._lock:
            self._logs.pop(run_name, None)

    def _keep(self, run_name: str, log: SessionLog) -> None:
        with self._lock:
            self._logs[run_name] = log
            self._logs.move_to_end(run_name)
            while len(self._logs) > 1 and (
                len(self._logs) > RECENT_LOGS or sum(kept.length for kept in self._logs.values()) > RECENT_EVENTS
            ):
                self._logs.popitem(last=False)


def read_log(run: agentfs.Run, known: SessionLog | None = None, head: str | None = None, hops: int = 0) -> SessionLog:
    """The session's log as of `head` (default: its newest checkpoint), by one sweep of the run's checkpoints
    (only those after `known`'s head when the head follows it); `hops`: the forks followed to reach this run."""
    ids = run.ids()
    if head is not None:
        if head not in ids:
            raise agentfs.FormatError(f"run {run.name!r} has no checkpoint {head} (a fork's source, pruned?)")
        ids = ids[: ids.index(head) + 1]
    start = ids.index(known.head) + 1 if known is not None and known.head in ids else 0
    checkpoints = {checkpoint.id: checkpoint for checkpoint in run.get_many(ids[start:])}
    newest = checkpoints[ids[-1]]
    state, updated = session_state(newest)
    line: list[agentfs.Checkpoint] = []  # the checkpoints of single events after the base, newest first
    at = newest
    while True:
        if at.has_value(EVENTS):
            base = new_log(at.id, whole_list(at), {}, 0.0)
            break
        if at.parent is None and at.forked_from is not None:
            source, source_head = at.forked_from  # `at` is that checkpoint, its event among those read there
            if hops >= MAX_FORK_HOPS:
                raise agentfs.FormatError(
                    f"run {run.name!r}: checkpoint {at.id} continues the events of run {source!r}, past {MAX_FORK_HOPS} runs "
                    "in a row that continue another's (forks cut short before their own list, or a cycle); refused"
                )
            base = read_log(agentfs.Run(run.store, source), None, source_head, hops + 1)
            break
        line.append(at)
        if at.parent is None:
            base = new_log(at.id, [], {}, 0.0)
            break
        if known is not None and at.parent == known.head:
            base = new_log(known.head, known.dumped(), known.state, known.updated)  # its own lists: others may grow known's
            break
        parent = checkpoints.get(at.parent)
        if parent is None:
            if start:  # the head is on another line than `known`'s: read the run whole
                return read_log(run, None, head, hops)
            raise agentfs.FormatError(f"run {run.name!r}: checkpoint {at.id} follows {at.parent}, which is gone (pruned?)")
        at = parent
    log = base
    for checkpoint in reversed(line):
        log = log.extended(checkpoint.id, single_event(checkpoint), {}, 0.0)
    return log._replace(head=newest.id, state=state, updated=updated)


def session_state(checkpoint: agentfs.Checkpoint) -> tuple[dict[str, Any], float]:
    """(session state, last_update_time) of a session checkpoint; anything else in the run is refused by name."""
    updated = checkpoint.metadata.get("last_update_time")
    state = checkpoint.value(STATE) if checkpoint.has_value(STATE) else None
    if not (isinstance(state, dict) and isinstance(updated, float | int) and (checkpoint.has_value(EVENTS) or checkpoint.has_value(EVENT))):
        raise _not_a_session(checkpoint)
    return state, float(updated)


def whole_list(checkpoint: agentfs.Checkpoint) -> list[dict[str, Any]]:
    events = checkpoint.value(EVENTS)
    if not (isinstance(events, list) and all(isinstance(event, dict) for event in events)):
        raise _not_a_session(checkpoint)
    return events


def single_event(checkpoint: agentfs.Checkpoint) -> dict[str, Any]:
    event = checkpoint.value(EVENT) if checkpoint.has_value(EVENT) and checkpoint.has_value(STATE) else None
    if not isinstance(event, dict):
        raise _not_a_session(checkpoint)
    return event


def _not_a_session(checkpoint: agentfs.Checkpoint) -> agentfs.FormatError:
    return agentfs.FormatError(f"checkpoint {checkpoint.id} of run {checkpoint.run!r} is not a Google ADK session checkpoint")
