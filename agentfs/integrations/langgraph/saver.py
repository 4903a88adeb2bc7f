"""AgentFSSaver: a LangGraph checkpointer whose checkpoints are agentfs commits.

- Runs (see layout.py): the checkpoints of one (thread, namespace) are one run, in LangGraph id
  order. LangGraph's ids are uuid6 strings that sort by time and "latest" means the greatest id, so
  the run's head is the latest checkpoint and a checkpoint id is found by a binary search over the
  run's commit ids (each probe reads one small cached entry), never by a scan. A put whose id is
  not greater than the head's (clock skew between machines) rebuilds the thread in order.
- Values (see records.py): a commit stores only the channels in `new_versions`, each serialized
  with `self.serde`, and records for every other channel the commit that holds its value, so a
  checkpoint costs what changed. Lists are stored item by item, so an appended message list
  writes only its tail chunk.
- Pending writes: one run per checkpoint, one commit per put_writes call; read back deduplicated
  by (task_id, idx) and in writes_sort_key order.
- Deletion: log entries are immutable, so a thread has generations. Its `ctl` run names the
  current one; delete_thread points it at a fresh empty generation, and prune, delete_for_runs,
  copy_thread (and an out-of-order put) copy the surviving checkpoints into a new generation,
  sharing their data, then switch the pointer with one commit, so readers see the old thread or
  the new one, never a mix. The old generation stays in the log (gc keeps what it references);
  all of this syncs to a remote like any other commit.

Concurrency hazard: a checkpoint or write committed by another caller to a thread while a
generation switch of that thread runs may land in the retired generation and be lost. Run
delete/prune/copy on idle threads (LangGraph's server cancels a thread's runs before deleting it).
"""

from __future__ import annotations

import asyncio
import os
import threading
import uuid
from bisect import bisect_left
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    PendingWrite,
    SerializerProtocol,
    get_checkpoint_id,
    get_checkpoint_metadata,
    writes_sort_key,
)

from ...errors import Conflict, FormatError
from ...store.checkpoint import Checkpoint as Commit
from ...store.run import Run
from ...store.store import Durability, Store, open_store
from . import records
from .layout import GENERATION, INITIAL_GENERATION, Layout, Namespace, Parsed, encode, hashed

ATTEMPTS = 8
RECENT_LISTS = 64  # serialized list values kept to compare the next version against
Plan = dict[str, list["_Item"]]  # namespace -> checkpoints of the new generation


@dataclass(frozen=True)
class _Item:
    """A checkpoint to commit into a new generation: a copy of a commit of `origin`, or a new state."""

    origin: Namespace  # the commit ids in the item's channel locations are commits of this namespace
    checkpoint_id: str
    parent_id: str | None
    commit_id: str | None = None
    state: dict[str, Any] | None = None


class AgentFSSaver(BaseCheckpointSaver[int]):
    """A LangGraph checkpointer that keeps every thread in an agentfs store.

    `store` is an open `agentfs.Store` or a path (opened with `remote`, `storage_options` and
    `durability` as in `agentfs.open`). `prefix` is the run name under which threads are kept.
    """

    def __init__(
        self,
        store: Store | str | os.PathLike[str],
        *,
        serde: SerializerProtocol | None = None,
        prefix: str = "langgraph",
        remote: str | None = None,
        storage_options: dict[str, Any] | None = None,
        durability: Durability | None = None,
    ) -> None:
        super().__init__(serde=serde)
        if isinstance(store, Store):
            if remote is not None or storage_options is not None or durability is not None:
                raise ValueError("remote, storage_options and durability apply only when AgentFSSaver opens the store")
            self.store = store
            self._owns_store = False
        else:
            self.store = open_store(store, remote=remote, storage_options=storage_options, durability=durability or "power")
            self._owns_store = True
        self.layout = Layout(prefix)
        self._indexed: set[tuple[str, str]] = set()
        self._recent: OrderedDict[tuple[str, str, str], tuple[list[records.Typed], int]] = OrderedDict()
        self._lock = threading.Lock()

    def close(self) -> None:
        if self._owns_store:
            self.store.close()

    def __enter__(self) -> AgentFSSaver:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # reading

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        thread, ns = _address(config)
        where = Namespace(thread, self._generation(thread)[0], ns)
        run = self._checkpoints(where)
        ids = run.ids()
        checkpoint_id = get_checkpoint_id(config)
        commit_id = self._find(run, ids, checkpoint_id) if checkpoint_id else (ids[-1] if ids else None)
        return None if commit_id is None else self._tuple(where, run.get(commit_id))

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Newest first; reads only the checkpoints it yields or tests against `filter`."""
        if config is None:
            spaces = self._spaces(self.store.runs())
        else:
            thread, ns = _address(config)
            if config["configurable"].get("checkpoint_ns") is None:
                spaces = self._spaces(self.store.runs(), thread, self._generation(thread)[0])
            else:
                spaces = [Namespace(thread, self._generation(thread)[0], ns)]
        only = get_checkpoint_id(config) if config else None
        before_id = get_checkpoint_id(before) if before else None
        left = limit
        for where in spaces:
            run = self._checkpoints(where)
            ids = run.ids()
            if only:
                found = self._find(run, ids, only)
                ids = [found] if found is not None and (before_id is None or only < before_id) else []
            elif before_id:
                ids = ids[: bisect_left(ids, before_id, key=lambda commit_id: records.ids(run.get(commit_id))[0])]
            for commit_id in reversed(ids):
                if left is not None and left <= 0:
                    return
                commit = run.get(commit_id)
                metadata = records.load_typed(self.serde, commit, "metadata")
                if filter and not all(metadata.get(key) == value for key, value in filter.items()):
                    continue
                if left is not None:
                    left -= 1
                yield self._tuple(where, commit, metadata)

    def _tuple(self, where: Namespace, commit: Commit, metadata: Any = None) -> CheckpointTuple:
        checkpoint_id, parent_id = records.ids(commit)
        run = self._checkpoints(where)
        values = {
            channel: records.load_value(self.serde, commit if holder is None else run.get(holder), channel, run.get)
            for channel, (_version, holder) in records.commit_blobs(commit).items()
        }
        checkpoint = records.load_typed(self.serde, commit, "checkpoint")
        return CheckpointTuple(
            config=_config(where.thread, where.ns, checkpoint_id),
            checkpoint={**checkpoint, "channel_values": values},
            metadata=records.load_typed(self.serde, commit, "metadata") if metadata is None else metadata,
            parent_config=_config(where.thread, where.ns, parent_id) if parent_id else None,
            pending_writes=self._pending_writes(where, checkpoint_id),
        )

    def _pending_writes(self, where: Namespace, checkpoint_id: str) -> list[PendingWrite]:
        run = self.store.run(self.layout.writes(where, checkpoint_id))
        found: dict[tuple[str, int], tuple[str, str, int, str, tuple[str, bytes]]] = {}
        for commit_id in run.ids():
            commit = run.get(commit_id)
            task_id, task_path, rows = records.write_batch(commit.state, str(commit))
            for idx, channel, value in rows:
                if idx >= 0 and (task_id, idx) in found:
                    continue  # a regular write is stored once; special ones (negative idx) are replaced
                found[(task_id, idx)] = (task_path, task_id, idx, channel, value)
        ordered = sorted(found.values(), key=lambda row: writes_sort_key(row[0], row[1], row[2]))
        return [(task_id, channel, self.serde.loads_typed(value)) for _path, task_id, _idx, channel, value in ordered]

    # writing

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        thread, ns = _address(config)
        parent_id = get_checkpoint_id(config)
        full_metadata = get_checkpoint_metadata(config, metadata)
        values = checkpoint["channel_values"]
        versions = checkpoint["channel_versions"]
        record = {key: value for key, value in checkpoint.items() if key != "channel_values"}
        fixed = {"checkpoint": list(self.serde.dumps_typed(record)), "metadata": list(self.serde.dumps_typed(full_metadata))}
        written = {
            channel: records.serialize(self.serde, values[channel]) for channel in new_versions if channel in values and channel in versions
        }
        for _ in range(ATTEMPTS):
            generation, control_head = self._generation(thread)
            where = Namespace(thread, generation, ns)
            run = self._checkpoints(where)
            ids = run.ids()
            parent = self._find(run, ids, parent_id) if parent_id else None
            previous: records.Blobs = {}
            if parent is not None:
                previous = {
                    channel: (version, holder or parent) for channel, (version, holder) in records.commit_blobs(run.get(parent)).items()
                }
            state, lists = self._encode(run, written, previous)
            state.update(fixed)
            state["blobs"] = {
                channel: [version, None if channel in written else previous[channel][1]]
                for channel, version in versions.items()
                if channel in written or (channel not in new_versions and channel in previous and previous[channel][0] == version)
            }
            if ids and records.ids(run.get(ids[-1]))[0] >= checkpoint["id"]:
                item = _Item(where, checkpoint["id"], parent_id, state=state)
                if self._rebuild(thread, control_head, self._insert(thread, generation, item), "put"):
                    break
                continue
            try:
                commit = run.commit(state, metadata=_commit_metadata(where, checkpoint["id"], parent_id), parent=ids[-1] if ids else None)
            except Conflict:
                continue
            for channel, remembered in lists.items():
                self._remember((run.name, commit.id, channel), remembered)
            break
        else:
            raise Conflict(f"thread {thread!r}: checkpoint {checkpoint['id']} lost {ATTEMPTS} races with other writers")
        if full_metadata.get("run_id") is not None:
            self._index_run(str(full_metadata["run_id"]), thread)
        return _config(thread, ns, checkpoint["id"])

    def _encode(
        self, run: Run, written: dict[str, Any], previous: records.Blobs
    ) -> tuple[dict[str, Any], dict[str, tuple[list[records.Typed], int]]]:
        """State keys for the written channels; a list that extends its previous version becomes a delta."""
        state: dict[str, Any] = {}
        lists: dict[str, tuple[list[records.Typed], int]] = {}
        for channel, data in written.items():
            if not isinstance(data, list):
                state[records.VALUE + channel] = list(data)
                continue
            base = previous[channel][1] if channel in previous else None
            known = self._recall(run, base, channel) if base is not None else None
            if known is not None and known[1] + 1 < records.SNAPSHOT_EVERY and data[: len(known[0])] == known[0]:
                count, depth = len(known[0]), known[1] + 1
                state[records.DELTA + channel] = [base, count, depth, [list(item) for item in data[count:]]]
            else:
                depth = 0
                state[records.ITEMS + channel] = [list(item) for item in data]
            lists[channel] = (data, depth)
        return state, lists

    def _recall(self, run: Run, commit_id: str, channel: str) -> tuple[list[records.Typed], int] | None:
        """(serialized items, delta depth) of the list `channel` holds in a commit, if it holds a list."""
        key = (run.name, commit_id, channel)
        with self._lock:
            if key in self._recent:
                self._recent.move_to_end(key)
                return self._recent[key]
        commit = run.get(commit_id)
        found = records.list_record(commit, channel)
        if found is None:
            return None
        known = (records.joined(*found, channel, run.get, f"{commit} channel {channel!r}"), records.depth(*found))
        self._remember(key, known)
        return known

    def _remember(self, key: tuple[str, str, str], known: tuple[list[records.Typed], int]) -> None:
        with self._lock:
            self._recent[key] = known
            if len(self._recent) > RECENT_LISTS:
                self._recent.popitem(last=False)

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        thread, ns = _address(config)
        where = Namespace(thread, self._generation(thread)[0], ns)
        rows = [
            [WRITES_IDX_MAP.get(channel, idx), channel, list(self.serde.dumps_typed(value))] for idx, (channel, value) in enumerate(writes)
        ]
        run = self.store.run(self.layout.writes(where, config["configurable"]["checkpoint_id"]))
        run.commit({"task_id": task_id, "task_path": task_path, "writes": rows})

    def _index_run(self, run_id: str, thread: str) -> None:
        """Remember that `thread` holds checkpoints of `run_id`, so delete_for_runs need not scan every thread."""
        if (run_id, thread) not in self._indexed:
            self.store.run(self.layout.by_run(run_id)).commit({"thread_id": thread})
            self._indexed.add((run_id, thread))

    # deleting and copying: a new generation per change

    def delete_thread(self, thread_id: str) -> None:
        thread = str(thread_id)
        self._rewrite(thread, "delete_thread", lambda spaces: {})

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        doomed = {str(run_id) for run_id in run_ids}
        threads: set[str] = set()
        for run_id in doomed:
            run = self.store.run(self.layout.by_run(run_id))
            for commit_id in run.ids():
                thread = run.get(commit_id).state
                if isinstance(thread, dict) and isinstance(thread.get("thread_id"), str):
                    threads.add(thread["thread_id"])

        def plan(spaces: list[Namespace]) -> Plan | None:
            kept: Plan = {}
            dropped = False
            for where in spaces:
                kept[where.ns] = []
                for commit_id in self._checkpoints(where).ids():
                    run_id = self._metadata(where, commit_id).get("run_id")
                    if run_id is not None and str(run_id) in doomed:
                        dropped = True
                    else:
                        kept[where.ns].append(self._item(where, commit_id))
            return kept if dropped else None

        for thread in sorted(threads):
            self._rewrite(thread, "delete_for_runs", plan)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        source, target = str(source_thread_id), str(target_thread_id)
        copied: list[_Item] = []

        def plan(spaces: list[Namespace]) -> Plan | None:
            merged: Plan = {where.ns: self._items(where) for where in spaces}
            copied.clear()
            for where in self._spaces(self.store.runs(), source, self._generation(source)[0]):
                present = {item.checkpoint_id for item in merged.get(where.ns, [])}
                copied.extend(item for item in self._items(where) if item.checkpoint_id not in present)
            for item in copied:
                merged.setdefault(item.origin.ns, []).append(item)
            return merged if copied else None

        self._rewrite(target, "copy_thread", plan)
        for item in copied:
            run_id = self._metadata(item.origin, item.commit_id).get("run_id") if item.commit_id else None
            if run_id is not None:
                self._index_run(str(run_id), target)

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """`keep_latest` keeps the latest checkpoint of each namespace (with its writes); `delete` keeps nothing."""
        if strategy not in ("keep_latest", "delete"):
            raise ValueError(f"unknown prune strategy {strategy!r}: use 'keep_latest' or 'delete'")
        for thread_id in thread_ids:
            if strategy == "delete":
                self.delete_thread(thread_id)
            else:
                self._rewrite(str(thread_id), "prune", self._keep_latest)

    def _keep_latest(self, spaces: list[Namespace]) -> Plan | None:
        heads = {where: self._checkpoints(where).ids() for where in spaces}
        if all(len(ids) <= 1 for ids in heads.values()):
            return None
        return {where.ns: [self._item(where, ids[-1])] for where, ids in heads.items() if ids}

    def _insert(self, thread: str, generation: str, new: _Item) -> Plan:
        """The thread as it is, with `new` in its place by id (replacing a checkpoint with the same id)."""
        plan = {where.ns: self._items(where) for where in self._spaces(self.store.runs(), thread, generation)}
        plan[new.origin.ns] = [item for item in plan.get(new.origin.ns, []) if item.checkpoint_id != new.checkpoint_id] + [new]
        return plan

    def _rewrite(self, thread: str, reason: str, plan: Callable[[list[Namespace]], Plan | None]) -> None:
        """Switch `thread` to a new generation holding `plan(current namespaces)`; None means no change."""
        for _ in range(ATTEMPTS):
            generation, control_head = self._generation(thread)
            wanted = plan(self._spaces(self.store.runs(), thread, generation))
            if wanted is None or self._rebuild(thread, control_head, wanted, reason):
                return
        raise Conflict(f"thread {thread!r}: {reason} lost {ATTEMPTS} races with other generation switches")

    def _rebuild(self, thread: str, control_head: str | None, plan: Plan, reason: str) -> bool:
        """Commit `plan` as a new generation, then point the thread at it; False if another switch came first."""
        generation = uuid.uuid4().hex
        for ns, items in plan.items():
            where = Namespace(thread, generation, ns)
            target = self._checkpoints(where)
            moved: dict[tuple[Namespace, str], str] = {}
            for item in sorted(items, key=lambda item: item.checkpoint_id):
                origin = self._checkpoints(item.origin)
                state = dict(origin.get(item.commit_id).state if item.state is None else item.state)
                located: dict[str, list[Any]] = {}
                for channel, (version, holder) in records.blobs(state.get("blobs"), f"{origin.name} {item.checkpoint_id}").items():
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
                        joined = records.joined(key, state.pop(key), channel, origin.get, f"{origin.name} {item.checkpoint_id}")
                        state[records.ITEMS + channel] = [list(value) for value in joined]
                commit = target.commit(state, metadata=_commit_metadata(where, item.checkpoint_id, item.parent_id))
                if item.commit_id is not None:
                    moved[(item.origin, item.commit_id)] = commit.id
                    writes = self.store.run(self.layout.writes(item.origin, item.checkpoint_id))
                    copy = self.store.run(self.layout.writes(where, item.checkpoint_id))
                    for commit_id in writes.ids():
                        copy.commit(writes.get(commit_id).state)
        try:
            self.store.run(self.layout.control(thread)).commit({"generation": generation, "reason": reason}, parent=control_head)
        except Conflict:
            return False
        return True

    # locating

    def _generation(self, thread: str) -> tuple[str, str | None]:
        """(current generation of `thread`, the commit of its ctl run that chose it)."""
        control = self.store.run(self.layout.control(thread))
        head = control.head_id()
        if head is None:
            return INITIAL_GENERATION, None
        state = control.get(head).state
        generation = state.get("generation") if isinstance(state, dict) else None
        if not isinstance(generation, str) or not GENERATION.fullmatch(generation):
            raise FormatError(f"{control.name}@{head} does not name a generation")
        return generation, head

    def _checkpoints(self, where: Namespace) -> Run:
        return self.store.run(self.layout.checkpoints(where))

    def _spaces(self, runs: list[str], thread: str | None = None, generation: str | None = None) -> list[Namespace]:
        """The namespaces among `runs` of `thread` (or of every thread) in `generation` (or the current one)."""
        root = None if thread is None else self.layout.thread_root(thread) + "/"
        current: dict[str, str] = {}
        spaces = []
        for name in runs:
            parsed = self.layout.parse_checkpoints(name) if root is None or name.startswith(root) else None
            if parsed is None:
                continue
            where = self._named(name, parsed)
            if where.thread not in current:
                current[where.thread] = generation if generation is not None else self._generation(where.thread)[0]
            if where.generation == current[where.thread]:
                spaces.append(where)
        return spaces

    def _named(self, name: str, parsed: Parsed) -> Namespace:
        """The namespace a checkpoints run holds; a hashed thread id or namespace is read from its first commit."""
        thread, ns = parsed.thread, parsed.ns
        if thread is None or ns is None:
            run = self.store.run(name)
            meta = run.get(run.ids()[0]).metadata
            thread = meta.get("thread_id") if thread is None and isinstance(meta, dict) else thread
            ns = meta.get("checkpoint_ns") if ns is None and isinstance(meta, dict) else ns
        where = Namespace(thread, parsed.generation, ns) if isinstance(thread, str) and isinstance(ns, str) else None
        if where is None or self.layout.checkpoints(where) != name:
            raise FormatError(f"run {name!r} does not record the thread and namespace its name stands for")
        return where

    def _find(self, run: Run, ids: list[str], checkpoint_id: str) -> str | None:
        """The commit holding `checkpoint_id`: a binary search, since a run is in checkpoint id order."""
        if not ids:
            return None
        index = len(ids) - 1
        if records.ids(run.get(ids[index]))[0] != checkpoint_id:
            index = bisect_left(ids, checkpoint_id, key=lambda commit_id: records.ids(run.get(commit_id))[0])
        if index < len(ids) and records.ids(run.get(ids[index]))[0] == checkpoint_id:
            return ids[index]
        return None

    def _item(self, where: Namespace, commit_id: str) -> _Item:
        checkpoint_id, parent_id = records.ids(self._checkpoints(where).get(commit_id))
        return _Item(where, checkpoint_id, parent_id, commit_id=commit_id)

    def _metadata(self, where: Namespace, commit_id: str) -> Any:
        return records.load_typed(self.serde, self._checkpoints(where).get(commit_id), "metadata")

    def _items(self, where: Namespace) -> list[_Item]:
        return [self._item(where, commit_id) for commit_id in self._checkpoints(where).ids()]

    # async: the same work on a worker thread, so file I/O never blocks the event loop

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await asyncio.to_thread(self.get_tuple, config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        tuples = self.list(config, filter=filter, before=before, limit=limit)
        while (item := await asyncio.to_thread(next, tuples, None)) is not None:
            yield item

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return await asyncio.to_thread(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        await asyncio.to_thread(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        await asyncio.to_thread(self.delete_thread, thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await asyncio.to_thread(self.delete_for_runs, run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await asyncio.to_thread(self.copy_thread, source_thread_id, target_thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        await asyncio.to_thread(self.prune, thread_ids, strategy=strategy)


def _address(config: RunnableConfig) -> tuple[str, str]:
    configurable = config["configurable"]
    return str(configurable["thread_id"]), str(configurable.get("checkpoint_ns") or "")


def _config(thread: str, ns: str, checkpoint_id: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread, "checkpoint_ns": ns, "checkpoint_id": checkpoint_id}}


def _commit_metadata(where: Namespace, checkpoint_id: str, parent_id: str | None) -> dict[str, Any]:
    meta = {"checkpoint_id": checkpoint_id, "parent_checkpoint_id": parent_id}
    if hashed(encode(where.thread)) or hashed(encode(where.ns)):
        meta.update(thread_id=where.thread, checkpoint_ns=where.ns)
    return meta
