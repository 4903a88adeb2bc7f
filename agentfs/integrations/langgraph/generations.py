"""Where a thread's checkpoints are now, and how a thread changes without rewriting its log.

Log entries are immutable and never deleted, so a thread has generations. Its `ctl` run names the
current one (its latest commit wins; none means generation "0"). Deleting a thread points it at a
fresh, empty generation. Prune, delete_for_runs, copy_thread and an out-of-order put copy the
checkpoints that remain into a new generation, in checkpoint id order, each followed by its pending
writes (in the layout of namespace_log.py, whatever layout they came from), sharing their data
(a value stays where it is when the commit holding it was copied too, and is copied, whole,
otherwise), then switch the pointer with one commit made with
`parent=` the pointer they started from: readers see the old thread or the new one, never a mix,
and of two switches racing, one retries.

A retired generation's runs are deleted (agentfs retention: retirement records, then gc frees
their objects) at the thread's next switch once RECLAIM_AFTER seconds have passed, so a reader
that resolved the old generation a moment before a switch can still finish; delete_thread
reclaims every retired generation at once. Only local runs are deleted: on a remote, they go with
its next `agentfs gc --remote`.

Concurrency hazard: a checkpoint or write that another caller commits to a thread while a switch
of that thread runs may land in the retired generation and be lost. Switch idle threads
(LangGraph's server cancels a thread's runs before deleting it).
"""

from __future__ import annotations

import itertools
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ...api import Store
from ...core.retention import delete_runs
from ...core.run import Run
from ...errors import Conflict
from ..langgraph_layout import INITIAL_GENERATION, Layout, Namespace, encode, hashed
from ..langgraph_threads import ThreadRuns, generation_of, write_batch_metadata
from ..langgraph_view import StoreView
from . import records
from .namespace_log import Heads, LateBatches, NamespaceLog

ATTEMPTS = 8
RECLAIM_AFTER = 30.0  # seconds a retired generation stays readable


@dataclass(frozen=True)
class Item:
    """A checkpoint for a new generation: a copy of commit `commit_id` of `origin`, or a new `state`."""

    origin: Namespace  # the commit ids in the item's channel locations and list deltas are commits of this namespace
    checkpoint_id: str
    parent_id: str | None
    commit_id: str | None = None
    state: dict[str, Any] | None = None
    writes: tuple[Any, ...] = ()  # states of its put_writes commits, oldest first


Plan = dict[str, list[Item]]  # namespace -> checkpoints of the new generation


class Generations(ThreadRuns):
    """`read`: how the logs it opens read small state values (a cache shared by the saver's calls); `heads`: the heads
    the saver appended."""

    def __init__(self, store: Store, layout: Layout, read: records.Read) -> None:
        super().__init__(store, layout)
        self.read = read
        self.heads = Heads()
        self.late = LateBatches()

    def checkpoints(self, where: Namespace) -> Run:
        return self.store.run(self.layout.checkpoints(where))

    def log(self, where: Namespace, view: StoreView | None = None) -> NamespaceLog:
        """`where`'s log as `view` sees the store (default: as it is now)."""
        return NamespaceLog(self.store, self.layout, where, self.read, self.heads, view or StoreView(self.store), self.late)

    def current_log(self, thread: str, ns: str, *, look: bool = True) -> tuple[NamespaceLog, str | None]:
        """The log of (thread, ns) in the thread's current generation, and the ctl commit that chose that generation,
        from one look at the store (`look=False`: from this process's last look, see StoreView)."""
        view = StoreView(self.store, look=look)
        generation, control_head = self.current(thread, view)
        return self.log(Namespace(thread, generation, ns), view), control_head

    def still_current(self, log: NamespaceLog, control_head: str | None) -> bool:
        """Whether the thread's ctl commit is still `control_head` (the one that chose `log`'s generation) as of this
        process's last look."""
        return log.view.still_head(self.layout.control(log.where.thread), control_head)

    def items(self, where: Namespace) -> list[Item]:
        log = self.log(where)
        return [_item(log, index) for index in log.checkpoints()]

    def keep_latest(self, spaces: list[Namespace]) -> Plan | None:
        logs = [self.log(where) for where in spaces]
        latest = {log: log.latest() for log in logs}
        if all(index is None or index == 0 for index in latest.values()):
            return None
        return {log.where.ns: [_item(log, index)] for log, index in latest.items() if index is not None}

    def insert(self, thread: str, generation: str, new: Item) -> Plan:
        """The thread as it is, with `new` in its place by id (replacing a checkpoint with the same id)."""
        plan = {where.ns: self.items(where) for where in self.spaces(self.store.runs(), thread, generation)}
        plan[new.origin.ns] = [item for item in plan.get(new.origin.ns, []) if item.checkpoint_id != new.checkpoint_id] + [new]
        return plan

    def rewrite(self, thread: str, reason: str, plan: Callable[[list[Namespace]], Plan | None]) -> None:
        """Switch `thread` to a new generation holding `plan(current namespaces)`; None means no change."""
        for _ in range(ATTEMPTS):
            generation, control_head = self.current(thread)
            wanted = plan(self.spaces(self.store.runs(), thread, generation))
            if wanted is None:  # nothing to change: still let go of generations past their grace
                self.reclaim(thread)
                return
            if self.rebuild(thread, control_head, wanted, reason):
                return
        raise Conflict(f"thread {thread!r}: {reason} lost {ATTEMPTS} races with other generation switches")

    def clear(self, thread: str) -> None:
        """Point `thread` at a new, empty generation (without listing what it holds now)."""
        for _ in range(ATTEMPTS):
            if self.rebuild(thread, self.current(thread)[1], {}, "delete_thread"):
                return
        raise Conflict(f"thread {thread!r}: delete_thread lost {ATTEMPTS} races with other generation switches")

    def rebuild(self, thread: str, control_head: str | None, plan: Plan, reason: str) -> bool:
        """Commit `plan` as a new generation, then point the thread at it; False if another switch came first."""
        generation = uuid.uuid4().hex
        for ns, items in plan.items():
            where = Namespace(thread, generation, ns)
            target = self.checkpoints(where)
            moved: dict[tuple[Namespace, str], str] = {}
            for item in sorted(items, key=lambda item: item.checkpoint_id):
                commit = target.commit(self._relocated(item, moved), metadata=commit_metadata(where, item.checkpoint_id, item.parent_id))
                if item.commit_id is not None:
                    moved[(item.origin, item.commit_id)] = commit.id
                for batch in item.writes:
                    target.commit(batch, metadata=write_batch_metadata(item.checkpoint_id))
        try:
            self.store.run(self.layout.control(thread)).commit({"generation": generation, "reason": reason}, parent=control_head)
        except Conflict:
            return False
        self.reclaim(thread, at_once=reason == "delete_thread")
        return True

    def reclaim(self, thread: str, *, at_once: bool = False) -> list[str]:
        """Delete the local runs of generations `thread` left over RECLAIM_AFTER seconds ago (all, `at_once`)."""
        control = self.store.run(self.layout.control(thread))
        switches = control.history()  # newest first: each names the generation it switched to
        if not switches:
            return []
        named = [generation_of(switch) for switch in switches]
        left_at = {INITIAL_GENERATION: switches[-1].created}
        for (newer, _), (_, generation) in itertools.pairwise(zip(switches, named, strict=True)):
            left_at[generation] = newer.created
        left_at.pop(named[0], None)  # the current one
        cutoff = time.time() - (0.0 if at_once else RECLAIM_AFTER)
        runs = [run for generation, at in left_at.items() if at.timestamp() <= cutoff for run in self._runs_of(thread, generation)]
        if runs:
            delete_runs(self.store.engine, runs)  # store.engine: runs that borrow from each other go at once (retention.py)
        if len(switches) > 1 and all(at.timestamp() <= cutoff for at in left_at.values()):
            control.prune(keep_last=1)  # every generation it named is gone: only the current pointer matters
        return runs

    def _runs_of(self, thread: str, generation: str) -> list[str]:
        prefix = f"{self.layout.thread_root(thread)}/g{generation}"
        # store.engine: this store's runs only (store.runs() would list a remote's too)
        return [run for run in self.store.engine.local_runs() if run == prefix or run.startswith(prefix + "/")]

    def _relocated(self, item: Item, moved: dict[tuple[Namespace, str], str]) -> dict[str, Any]:
        """The item's state for its new run: references to commits copied before it follow them, the rest is inlined."""
        origin = self.checkpoints(item.origin)
        state = dict(item.state or {}) if item.commit_id is None else dict(origin.get(item.commit_id).state)
        where = f"{origin.name} {item.checkpoint_id}"
        located: dict[str, list[Any]] = {}
        for channel, (version, holder) in records.blobs(state.get("blobs"), where).items():
            if holder is not None and (item.origin, holder) in moved:
                holder = moved[(item.origin, holder)]
            elif holder is not None:
                state.update(records.standalone(origin.get(holder), channel, origin.get))
                holder = None
            located[channel] = [version, holder]
        state["blobs"] = located
        for key in [key for key in state if key.startswith(records.DELTA)]:
            base = state[key][0] if isinstance(state[key], list) and state[key] else None
            if isinstance(base, str) and (item.origin, base) in moved:
                state[key] = [moved[(item.origin, base)], *state[key][1:]]
            else:
                channel = key[len(records.DELTA) :]
                items, _depth = records.extend(key, state.pop(key), where, records.resolver(origin.get, channel))
                state[records.ITEMS + channel] = [list(value) for value in items]
        return state


def _item(log: NamespaceLog, index: int) -> Item:
    checkpoint_id, parent_id = records.ids(log.commit(index))
    return Item(log.where, checkpoint_id, parent_id, commit_id=log.ids[index], writes=tuple(log.write_batches(index)))


def commit_metadata(where: Namespace, checkpoint_id: str, parent_id: str | None) -> dict[str, Any]:
    """The agentfs metadata of a checkpoint commit: the LangGraph ids, and the names a hashed run name hides."""
    meta: dict[str, Any] = {"checkpoint_id": checkpoint_id, "parent_checkpoint_id": parent_id, "inline_writes": True}
    if hashed(encode(where.thread)) or hashed(encode(where.ns)):
        meta.update(thread_id=where.thread, checkpoint_ns=where.ns)
    return meta
