"""Where a checkpoint's late write batches are, noted in its commit: reading its writes reads those, not every late batch.

A write batch for a checkpoint that is not the head of its namespace's checkpoints run goes to the namespace's late
run (namespace_log.py). Under LangGraph's background checkpointing that is most of them (a task's write often comes
before its checkpoint's put is done), and the late run grows with the thread: a fresh saver's get_tuple decoded every
batch in it to find the few for the latest checkpoint (300 turns of a tool-calling graph: 723 batches, 72 ms).

So a checkpoint commit carries, in its agentfs metadata under "late", what the late run held for it when it was
committed (LateMark):

- head: the late run's greatest id then (None: it was empty), count: how many ids it held up to that one;
- own: the ids of the batches for this checkpoint among them;
- ahead: the ids of those for checkpoints with greater ids, by checkpoint id (a write can come before its
  checkpoint's put): the next checkpoint's mark starts from its parent's instead of reading the late run again.

A reader takes `own` and reads the ids after `head` only when the late run still holds exactly `count` ids up to
`head` and retention never removed one of them: a run's ids only ever grow (each commit's id is greater than the head it was appended
after, under the run's lock), so the same count means the same ids. Otherwise (a batch appended elsewhere under an
older id, then synced in; a batch retention removed; a mark malformed or missing, as in commits of an earlier saver or of a
rebuilt generation) it reads every late batch, as before (tests/integrations/test_langgraph_late_marks.py).
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from typing import Any, NamedTuple

from ...core.checkpoint import Checkpoint as Commit
from ...names import ID

LATE = "late"  # the key of a checkpoint commit's agentfs metadata that holds its LateMark


class LateMark(NamedTuple):
    """What a namespace's late run held for one checkpoint when it was committed (module docstring)."""

    head: str | None
    count: int  # type: ignore[assignment]  # (a field named as tuple.count)
    own: list[str]
    ahead: dict[str, list[str]]

    def to_metadata(self) -> dict[str, Any]:
        return {"head": self.head, "count": self.count, "own": self.own, "ahead": self.ahead}

    def start(self, ids: list[str], retires: bool) -> int | None:
        """Where the ids after `head` begin in the late run's sorted `ids`, if it still holds exactly the ids this
        mark saw up to `head` (`own` among them) and retention never removed any of its batches (`retires`); else
        None: read every late batch."""
        start = 0 if self.head is None else bisect_right(ids, self.head)
        if retires or start != self.count or any(_position(ids, own, start) is None for own in self.own):
            return None
        return start


def _position(ids: list[str], record_id: str, stop: int) -> int | None:
    position = bisect_left(ids, record_id, 0, stop)
    return position if position < stop and ids[position] == record_id else None


def _ids(raw: Any) -> list[str] | None:
    if isinstance(raw, list) and all(isinstance(record_id, str) and ID.fullmatch(record_id) for record_id in raw):
        return raw
    return None


def read_mark(commit: Commit) -> LateMark | None:
    """The commit's LateMark, or None if it has none or a malformed one (its writes are then found by reading them all)."""
    metadata = commit.metadata
    raw = metadata.get(LATE) if isinstance(metadata, dict) else None
    if not isinstance(raw, dict):
        return None
    head, count, own, ahead = raw.get("head"), raw.get("count"), _ids(raw.get("own")), raw.get("ahead")
    if head is not None and not (isinstance(head, str) and ID.fullmatch(head)):
        return None
    if type(count) is not int or count < 0 or own is None or not isinstance(ahead, dict):
        return None
    checked: dict[str, list[str]] = {}
    for checkpoint_id, record_ids in ahead.items():
        found = _ids(record_ids)
        if not isinstance(checkpoint_id, str) or found is None:
            return None
        checked[checkpoint_id] = found
    return LateMark(head, count, own, checked)
