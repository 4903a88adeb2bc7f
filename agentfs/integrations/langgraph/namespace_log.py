"""One namespace's checkpoints run, read once: its checkpoints and the pending writes of each.

The run holds a checkpoint commit, then the put_writes commits made for it while it was the head
(each marked `{"writes": true}` in its agentfs metadata, with the checkpoint's id), then the next
checkpoint, and so on. Writes for a checkpoint that is no longer the head (or not yet saved) go to
the namespace's `late` run instead, so the run stays in LangGraph id order for binary search.
A checkpoint written by the earlier layout (no `inline_writes` mark) also has its writes in its own
run `w/<checkpoint>`.
"""

from __future__ import annotations

import threading
from bisect import bisect_left
from collections import OrderedDict
from collections.abc import Iterator
from functools import cached_property
from typing import Any, NamedTuple

from ...api import Store
from ...core.checkpoint import Checkpoint as Commit
from ...core.run import Run
from ..langgraph_layout import Layout, Namespace
from ..langgraph_threads import is_write_batch
from ..langgraph_view import StoreView
from . import records
from .late_marks import LateMark, read_mark

RECENT_COMMITS = 64
RECENT_HEADS = 1024
LATE_BATCHES = 16_384  # late write batches a saver keeps decoded (LateBatches), some 1 KB each
# late batches after a checkpoint's LateMark that are read for its writes: past this many (an old checkpoint of a long
# thread), every late batch is read instead, once per log, as list() reads them
LATE_AFTER_MARK = 256


class Tip(NamedTuple):
    """A checkpoints run's head commit (None if empty), its key, and the commit of the checkpoint asked for (None if absent)."""

    head: str | None
    head_key: str | None
    checkpoint: str | None


class Head(NamedTuple):
    """A checkpoints run's head as its appender knows it: the head's commit and key, and the commit and key of the
    checkpoint it is or follows (its own commit and key when the head is a checkpoint)."""

    commit: str
    key: str
    checkpoint: str
    checkpoint_key: str


class Heads:
    """The heads this saver appended, for the RECENT_HEADS runs it appended to last: the next put_writes to a
    checkpoint then reads no commit back to find it (the k-th of a step's tasks would read k). Safe to share between
    threads."""

    def __init__(self) -> None:
        self._known: OrderedDict[str, Head] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, run: str, commit: str) -> Head | None:
        """The head of `run` if `commit` is the one this saver appended there last."""
        with self._lock:
            head = self._known.get(run)
        return head if head is not None and head.commit == commit else None

    def appended(self, run: str, head: Head) -> None:
        with self._lock:
            self._known[run] = head
            self._known.move_to_end(run)
            if len(self._known) > RECENT_HEADS:
                self._known.popitem(last=False)


class LateBatches:
    """The late write batches this saver decoded, by late run and commit id, the least recently used dropped past
    LATE_BATCHES. A checkpoint's entry never changes under its id (a retired one leaves the run's ids instead), so a
    look at a namespace's late batches decodes only those it has not seen: LangGraph asks for them at every
    get_tuple, and they grow with the thread's history (each read of them all cost a turn of 300 more than
    SqliteSaver's whole turn). Safe to share between threads."""

    def __init__(self, capacity: int = LATE_BATCHES) -> None:
        self.capacity = capacity
        self._known: OrderedDict[tuple[str, str], Commit] = OrderedDict()
        self._lock = threading.Lock()

    def read(self, run: Run, ids: list[str]) -> list[Commit]:
        """The commits of `ids` in `run`, in order: those kept, the rest read in one sweep (Run.get_many, which raises
        what get() raises) and kept."""
        with self._lock:
            known = {commit_id: commit for commit_id in ids if (commit := self._known.get((run.name, commit_id))) is not None}
        missing = [commit_id for commit_id in ids if commit_id not in known]
        read = dict(zip(missing, run.get_many(missing), strict=True)) if missing else {}
        known.update(read)
        with self._lock:
            for commit_id in ids:  # the ones asked for now are the most recently used
                self._known[(run.name, commit_id)] = known[commit_id]
                self._known.move_to_end((run.name, commit_id))
            while len(self._known) > self.capacity:
                self._known.popitem(last=False)
        return [known[commit_id] for commit_id in ids]

    def add(self, run: str, commit: Commit) -> None:
        """Keep a late batch this saver just committed to `run`: the next checkpoint's LateMark reads it from here."""
        with self._lock:
            self._known[(run, commit.id)] = commit
            while len(self._known) > self.capacity:
                self._known.popitem(last=False)


class NamespaceLog:
    """`where`'s checkpoints run as `view` sees it, listed the first time its ids are needed; `late` is read once, when
    writes are asked for."""

    def __init__(
        self, store: Store, layout: Layout, where: Namespace, read: records.Read, heads: Heads, view: StoreView, late: LateBatches
    ) -> None:
        self.store = store
        self.late_batches = late
        self.layout = layout
        self.where = where
        self.read = read
        self.heads = heads
        self.view = view
        self.run: Run = store.run(layout.checkpoints(where))
        self._late: dict[str, list[Commit]] | None = None
        self._commits: dict[int, Commit] = {}

    @cached_property
    def ids(self) -> list[str]:
        return self.view.ids(self.run.name)

    def tip(self, checkpoint_id: str | None, *, trust_hint: bool) -> Tip:
        """The head, and the commit of `checkpoint_id` (if given). With `trust_hint`, when this process made the head
        and `checkpoint_id` is the checkpoint there (a put after the latest, writes for it), the log is not listed:
        a commit made with `parent=` the head fails if another writer appended since."""
        known = self.known_tip(checkpoint_id) if trust_hint else None
        if known is not None:
            return known
        if not self.ids:
            return Tip(None, None, None)
        index = self.find(checkpoint_id) if checkpoint_id is not None else None
        return Tip(self.ids[-1], self.key(len(self.ids) - 1), None if index is None else self.ids[index])

    def known_head(self) -> Head | None:
        """This process's last append to the run, if it was the run's head as this process last saw it (nothing
        listed, no look at the segments: another writer may have appended since, which a commit's parent= check finds)."""
        # store.engine: this process's last append to the run, and whether it was indexed, without a look at the segments
        hint = self.store.engine.heads.get(self.run.name)
        # knew_entry takes no look at the segments: if the hint was retired since, the commit's parent= check fails
        if hint is not None and self.store.engine.knew_entry(self.run.name, hint):
            return self.heads.get(self.run.name, hint) or self._read_head(hint)
        return None

    def known_tip(self, checkpoint_id: str | None) -> Tip | None:
        """tip() from known_head(), if `checkpoint_id` is the checkpoint there (or None); else None."""
        head = self.known_head()
        if head is not None and (checkpoint_id is None or head.checkpoint_key == checkpoint_id):
            return Tip(head.commit, head.key, head.checkpoint if checkpoint_id is not None else None)
        return None

    def known_writes_tip(self, checkpoint_id: str) -> Tip | None:
        """tip() for write batches to `checkpoint_id` from known_head(), with the checkpoint's commit only if it is the
        checkpoint there: any other batch goes to the late run, which is right whatever others appended since (a
        checkpoint's writes are read from the late run too); a batch appended after a head another writer moved is
        refused by its parent= check. None without a known head."""
        head = self.known_head()
        if head is None:
            return None
        return Tip(head.commit, head.key, head.checkpoint if head.checkpoint_key == checkpoint_id else None)

    def writes_tip(self, checkpoint_id: str) -> Tip:
        """tip() for write batches to `checkpoint_id`, from the listing: the checkpoint's commit only when the head is
        that checkpoint or one of its writes (else the batch goes to the late run, so no search for it)."""
        if not self.ids:
            return Tip(None, None, None)
        head_key = self.key(len(self.ids) - 1)
        latest = self.latest() if head_key == checkpoint_id else None
        return Tip(self.ids[-1], head_key, None if latest is None else self.ids[latest])

    def _read_head(self, commit_id: str) -> Head:
        """Commit `commit_id` of this run as a head: read back, and the write commits before it, down to a checkpoint."""
        commit = self.run.get(commit_id)
        key = records.ids(commit)[0]
        while is_write_batch(commit) and commit.parent is not None:
            commit = self.run.get(commit.parent)
        return Head(commit_id, key, commit.id, records.ids(commit)[0])

    def appended(self, commit: str, checkpoint_id: str, checkpoint_commit: str) -> None:
        """Note that this saver appended `commit` (checkpoint `checkpoint_id`, whose commit is `checkpoint_commit`,
        or a write batch for it) as the run's head."""
        self.heads.appended(self.run.name, Head(commit, checkpoint_id, checkpoint_commit, checkpoint_id))

    def commit(self, index: int) -> Commit:
        """Commit `index`; the RECENT_COMMITS last asked for are kept (with their metadata, decoded on first use), as
        a scan asks for each several times (is it a checkpoint, its writes), but a rewrite goes through them all."""
        commit = self._commits.get(index)
        if commit is None:
            commit = self._commits[index] = self.run.get(self.ids[index])
            if len(self._commits) > RECENT_COMMITS:
                del self._commits[next(iter(self._commits))]
        return commit

    def key(self, index: int) -> str:
        """The LangGraph checkpoint id commit `index` is (or holds writes for); keys never decrease along the run."""
        return records.ids(self.commit(index))[0]

    def is_checkpoint(self, index: int) -> bool:
        return not is_write_batch(self.commit(index))

    def checkpoints(self) -> Iterator[int]:
        """Indexes of the checkpoint commits, oldest first."""
        return (index for index in range(len(self.ids)) if self.is_checkpoint(index))

    def latest(self) -> int | None:
        """Index of the newest checkpoint: the head, or the checkpoint a run of write commits at the end follows."""
        index = len(self.ids) - 1
        while index >= 0 and not self.is_checkpoint(index):
            index -= 1
        return index if index >= 0 else None

    def find(self, checkpoint_id: str) -> int | None:
        """Index of the commit of `checkpoint_id`: a binary search (it comes before the writes made for it)."""
        latest = self.latest()
        if latest is not None and self.key(latest) == checkpoint_id:
            return latest
        index = self.before(checkpoint_id)
        return index if index < len(self.ids) and self.key(index) == checkpoint_id and self.is_checkpoint(index) else None

    def before(self, checkpoint_id: str) -> int:
        """How many commits come before the first whose key is `checkpoint_id` or greater."""
        return bisect_left(range(len(self.ids)), checkpoint_id, key=self.key)

    def latest_checkpoint(self) -> tuple[Commit, list[Any]] | None:
        """The newest checkpoint and its write batches, found from the head back without listing the whole log."""
        head = self.view.head(self.run.name)
        if head is None:
            return None
        commit = self.run.get(head)
        following = []
        while is_write_batch(commit) and commit.parent is not None:
            following.append(commit)
            commit = self.run.get(commit.parent)
        return commit, self._batches(commit, following[::-1])

    def write_batches(self, index: int) -> list[Any]:
        """The states of the put_writes commits for the checkpoint at `index`, oldest first."""
        following = index + 1
        while following < len(self.ids) and not self.is_checkpoint(following):
            following += 1
        return self._batches(self.commit(index), [self.commit(at) for at in range(index + 1, following)])

    def _batches(self, commit: Commit, inline: list[Commit]) -> list[Any]:
        """A checkpoint's write batches in the order they were made: in its own run (earlier layout), the `inline`
        ones after it, the late ones (a write LangGraph makes while the checkpoint's own put is still running lands
        in `late` before the ones after it inline; a special write replaces an earlier one, so order matters)."""
        checkpoint_id = records.ids(commit)[0]
        batches = [*inline, *self.late_for(commit, checkpoint_id)]
        if not records.inline_writes(commit):
            legacy = self.store.run(self.layout.writes(self.where, checkpoint_id))
            batches += [legacy.get(commit_id) for commit_id in self.view.ids(legacy.name)]
        return [records.batch_state(batch, self.read) for batch in sorted(batches, key=lambda batch: batch.manifest.created)]

    def late(self) -> dict[str, list[Commit]]:
        """The namespace's late write batches by checkpoint id."""
        if self._late is None:
            self._late = {}
            for commit in self.late_batches.read(self.late_run, self.late_ids):  # those not decoded before: one sweep
                self._late.setdefault(records.ids(commit)[0], []).append(commit)
        return self._late

    @cached_property
    def late_run(self) -> Run:
        return self.store.run(self.layout.late(self.where))

    @cached_property
    def late_ids(self) -> list[str]:
        return self.view.ids(self.late_run.name)

    @cached_property
    def _late_retires(self) -> bool:
        return self.view.retires(self.late_run.name)

    def late_for(self, commit: Commit, checkpoint_id: str) -> list[Commit]:
        """The late write batches of the checkpoint `commit` (`checkpoint_id`): through its LateMark, those it names
        and those after its head, when the mark still holds (late_marks.py); else from every late batch."""
        mark = read_mark(commit)
        if mark is not None and self._late is None:
            start = mark.start(self.late_ids, self._late_retires)
            if start is not None and len(self.late_ids) - start <= LATE_AFTER_MARK:
                found = self.late_batches.read(self.late_run, mark.own + self.late_ids[start:])
                if all(records.ids(batch)[0] == checkpoint_id for batch in found[: len(mark.own)]):
                    return [batch for batch in found if records.ids(batch)[0] == checkpoint_id]
        return self.late().get(checkpoint_id, [])

    def late_mark(self, checkpoint_id: str, parent: Commit | None) -> LateMark:
        """The LateMark of checkpoint `checkpoint_id`, about to be committed after `parent` (its parent's commit, if
        any): from the parent's mark and the late batches after its head when that mark holds, else from every batch.
        Called under the saver's append lock, which its late appends take too."""
        base = read_mark(parent) if parent is not None else None
        start = base.start(self.late_ids, self._late_retires) if base is not None else None
        own: list[str] = []
        ahead: dict[str, list[str]] = {}
        if base is None or start is None:
            start = 0
        else:
            own = list(base.ahead.get(checkpoint_id, []))
            ahead = {key: list(ids) for key, ids in base.ahead.items() if key > checkpoint_id}
        for batch in self.late_batches.read(self.late_run, self.late_ids[start:]):
            key = records.ids(batch)[0]
            if key == checkpoint_id:
                own.append(batch.id)
            elif key > checkpoint_id:
                ahead.setdefault(key, []).append(batch.id)
        return LateMark(self.late_ids[-1] if self.late_ids else None, len(self.late_ids), own, ahead)
