"""AgentFSSaver: a LangGraph checkpointer whose checkpoints are agentfs commits.

- Runs (see ../langgraph_layout.py): the checkpoints of one (thread, namespace) are one run, in LangGraph id
  order. LangGraph's ids are uuid6 strings that sort by time and "latest" means the greatest id, so
  the run's head is the latest checkpoint and a checkpoint id is found by a binary search over the
  run's commit ids (each probe reads one small cached entry), never by a scan. A put whose id is
  not greater than the head's (clock skew between machines) rebuilds the thread in order.
- Values (see records.py): a commit stores only the channels in `new_versions` and those its parent
  does not hold at the same version (a copy-fork), each serialized with `self.serde`, and records for
  every other channel the commit that holds its value, so a checkpoint costs what changed; a list
  that grew is stored as a delta of its new items (see list_values.py: one msgpack call per list).
- Reading (see tuples.py): a commit and its write batches become a CheckpointTuple; a call takes every head and
  id list from one look at the store (see ../langgraph_view.py).
- Channel versions: integers; a thread written by a stock saver (string versions) keeps their form.
- Pending writes (see namespace_log.py): commits in the checkpoints run right after their
  checkpoint, so a thread is a handful of runs however long; read back deduplicated by
  (task_id, idx) and in writes_sort_key order.
- Deletion and copies (see generations.py): a thread switches to a new generation; nothing in
  the log is rewritten.
"""

from __future__ import annotations

import asyncio
import os
import random
import threading
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    DeltaChannelHistory,
    SerializerProtocol,
    get_checkpoint_id,
    get_checkpoint_metadata,
)

from ...api import Durability, EncryptionArg, Store
from ...core.checkpoint import Checkpoint as Commit
from ...errors import Conflict
from ..langgraph_layout import Layout, Namespace
from ..langgraph_threads import write_batch_metadata
from ..langgraph_view import StoreView
from ..run_names import open_or_use
from . import records, tuples
from .generations import ATTEMPTS, Generations, Item, Plan, commit_metadata
from .late_marks import LATE
from .list_values import ListValues
from .namespace_log import NamespaceLog

# the saver has a method named list: signatures in its class body use these names instead
Spaces = list[Namespace]
Batches = list[Any]  # states of put_writes commits
APPEND_LOCKS = 64  # (thread, namespace) pairs share this many locks


class AgentFSSaver(BaseCheckpointSaver[int]):
    """A LangGraph checkpointer that keeps every thread in an agentfs store.

    `store` is an open `agentfs.Store` or a path (opened with `remote`, `storage_options`,
    `durability` and `encryption` as in `agentfs.open`). `prefix` is the run name under which threads are kept.
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
        encryption: EncryptionArg = None,
    ) -> None:
        super().__init__(serde=serde)
        self.store, self._owns_store = open_or_use(
            store, "AgentFSSaver", remote=remote, storage_options=storage_options, durability=durability, encryption=encryption
        )
        self.layout = Layout(prefix)
        self._values = records.CommitValues()
        self.generations = Generations(self.store, self.layout, self._values)
        self._indexed: set[tuple[str, str]] = set()
        self._lists = ListValues()
        self._append_locks = [threading.Lock() for _ in range(APPEND_LOCKS)]

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
        log = self.generations.current_log(thread, ns)[0]
        checkpoint_id = get_checkpoint_id(config)
        if not checkpoint_id:
            latest = log.latest_checkpoint()
            return None if latest is None else self._tuple(log, *latest)
        index = log.find(checkpoint_id)
        return None if index is None else self._tuple(log, log.commit(index), log.write_batches(index))

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        """Newest first; reads only the checkpoints it yields or tests against `filter`, from one look at the store."""
        view = StoreView(self.store)
        if config is None:
            spaces = self.generations.spaces(self.store.runs(), view=view)
        else:
            thread, ns = _address(config)
            if config["configurable"].get("checkpoint_ns") is None:
                spaces = self.generations.spaces(self.store.runs(), thread, self.generations.current(thread, view)[0])
            else:
                spaces = [Namespace(thread, self.generations.current(thread, view)[0], ns)]
        only = get_checkpoint_id(config) if config else None
        before_id = get_checkpoint_id(before) if before else None
        left = limit
        for where in spaces:
            log = self.generations.log(where, view)
            if only:
                found = log.find(only)
                indexes = [found] if found is not None and (before_id is None or only < before_id) else []
            else:
                indexes = list(range(log.before(before_id) if before_id else len(log.ids)))
            for index in reversed(indexes):
                if left is not None and left <= 0:
                    return
                if not log.is_checkpoint(index):
                    continue
                commit = log.commit(index)
                metadata = records.load_typed(self.serde, commit, "metadata", self._values)
                if filter and not all(metadata.get(key) == value for key, value in filter.items()):
                    continue
                if left is not None:
                    left -= 1
                yield self._tuple(log, commit, log.write_batches(index), metadata)

    def _tuple(self, log: NamespaceLog, commit: Commit, batches: Batches, metadata: Any = None) -> CheckpointTuple:
        return tuples.checkpoint_tuple(self.serde, self._lists, self._values, log, commit, batches, metadata)

    def get_delta_channel_history(self, *, config: RunnableConfig, channels: Sequence[str]) -> Mapping[str, DeltaChannelHistory]:
        """BaseCheckpointSaver's answer, reading along the parent chain only the requested channels and their writes."""
        if not channels:
            return {}
        thread, ns = _address(config)
        log = self.generations.current_log(thread, ns)[0]
        return tuples.delta_channel_history(self.serde, self._lists, self._values, log, get_checkpoint_id(config), channels)

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
        if full_metadata.get("run_id") is not None:
            self._index_run(str(full_metadata["run_id"]), thread)  # first: a crash then leaves an extra index entry, not a missing one
        for attempt in range(ATTEMPTS):
            with self._appending(thread, ns):  # in this process, appends to a namespace take turns
                # after this saver's own head (the next step of a graph): from this process's last look, as put_writes
                tip = None
                if attempt == 0 and parent_id and self.store.remote is None:
                    log, control_head = self.generations.current_log(thread, ns, look=False)
                    tip = log.known_tip(parent_id)
                lazy = tip is not None
                if tip is None:
                    log, control_head = self.generations.current_log(thread, ns)
                    tip = log.tip(parent_id, trust_hint=attempt == 0)
                where = log.where
                run = log.run
                previous: records.Blobs = {}
                parent_commit = None
                if tip.checkpoint is not None:
                    parent = tip.checkpoint
                    parent_commit = run.get(parent)
                    located = records.commit_blobs(parent_commit, self._values)
                    previous = {channel: (version, holder or parent) for channel, (version, holder) in located.items()}
                # a channel is shared with the parent only at the very version the parent holds (as the stock savers
                # key values by version); a copy-fork is saved under its source's parent with new_versions={}, so
                # its values at newer versions are written here, not dropped
                shared = {
                    channel
                    for channel, version in versions.items()
                    if channel not in new_versions and channel in previous and previous[channel][0] == version
                }
                written = {channel: value for channel, value in values.items() if channel in versions and channel not in shared}
                state, lists = self._lists.encode(self.serde, run, written, previous)
                state.update(fixed)
                state["blobs"] = {
                    channel: [version, None if channel in written else previous[channel][1]]
                    for channel, version in versions.items()
                    if channel in written or channel in shared
                }
                if tip.head_key is not None and tip.head_key >= checkpoint["id"]:
                    item = Item(where, checkpoint["id"], parent_id, state=state)
                    if self.generations.rebuild(thread, control_head, self.generations.insert(thread, where.generation, item), "put"):
                        break
                    continue
                marks = commit_metadata(where, checkpoint["id"], parent_id)
                marks[LATE] = log.late_mark(checkpoint["id"], parent_commit).to_metadata()
                try:
                    commit = run.commit(state, metadata=marks, parent=tip.head)
                except Conflict:
                    continue
                if lazy and not self.generations.still_current(log, control_head):
                    continue  # committed to a generation retired before the commit's look: again, in the current one
                for channel, remembered in lists.items():
                    self._lists.remember((run.name, commit.id, channel), remembered)
                self._values.remember(commit, {key: state[key] for key in records.OWN_KEYS})
                log.appended(commit.id, checkpoint["id"], commit.id)
                break
        else:
            raise Conflict(f"thread {thread!r}: checkpoint {checkpoint['id']} lost {ATTEMPTS} races with other writers")
        return tuples.config_of(thread, ns, checkpoint["id"])

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        thread, ns = _address(config)
        checkpoint_id = str(config["configurable"]["checkpoint_id"])
        batch = records.new_write_batch(self.serde, writes, task_id, task_path)
        for attempt in range(ATTEMPTS):
            with self._appending(thread, ns):
                # from this process's last look (no look at the segments) when this saver made the head: inline when
                # it is `checkpoint_id` or one of its writes (the k-th task of a step), else late (LangGraph's background
                # put of the next checkpoint overtook the task's writes, or its own put has not ended); the commit's
                # own look, under the run lock, then shows whether the thread switched generation since (still_current)
                tip = None
                if attempt == 0 and self.store.remote is None:
                    log, control_head = self.generations.current_log(thread, ns, look=False)
                    tip = log.known_writes_tip(checkpoint_id)
                lazy = tip is not None
                if tip is None:  # this saver has not appended to the run yet, or a retry: a fresh look
                    log, control_head = self.generations.current_log(thread, ns)
                    tip = log.writes_tip(checkpoint_id)
                if tip.head_key != checkpoint_id:
                    # not the head: appending here would break the run's id order that binary search relies on
                    commit = log.late_run.commit(batch, metadata={"checkpoint_id": checkpoint_id})
                    if lazy and not self.generations.still_current(log, control_head):
                        continue  # appended to a generation retired before the commit's look: again, in the current one
                    self.generations.late.add(log.late_run.name, commit)
                else:
                    try:
                        commit = log.run.commit(batch, metadata=write_batch_metadata(checkpoint_id), parent=tip.head)
                    except Conflict:
                        continue
                    if lazy and not self.generations.still_current(log, control_head):
                        continue  # as above
                    if tip.checkpoint is not None:
                        log.appended(commit.id, checkpoint_id, tip.checkpoint)
                self._values.remember(commit, {"": batch})
                return
        raise Conflict(f"thread {thread!r}: writes for checkpoint {checkpoint_id} lost {ATTEMPTS} races with other writers")

    def _appending(self, thread: str, ns: str) -> threading.Lock:
        """The lock this process's appends to (thread, ns) take: concurrent tasks' put_writes to one checkpoint would
        otherwise each commit with parent= the same head and all but one retry, up to losing ATTEMPTS races."""
        return self._append_locks[hash((thread, ns)) % APPEND_LOCKS]

    def get_next_version(self, current: int | str | None, channel: None) -> Any:
        """1, 2, 3...; after a stock saver's string version ("<32-digit counter>.<random>"), the next one in that form
        (LangGraph compares a channel's versions with each other, so a thread never mixes the two)."""
        if isinstance(current, str):
            return f"{int(current.split('.')[0]) + 1:032}.{random.random():016}"
        return 1 if current is None else current + 1

    def _index_run(self, run_id: str, thread: str) -> None:
        """Remember that `thread` holds checkpoints of `run_id`, so delete_for_runs need not scan every thread."""
        if (run_id, thread) not in self._indexed:
            self.store.run(self.layout.run_bucket(run_id)).commit({"thread_id": thread}, metadata={"run_id": run_id})
            self._indexed.add((run_id, thread))

    # deleting and copying: a new generation per change

    def delete_thread(self, thread_id: str) -> None:
        self.generations.clear(str(thread_id))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        doomed = {str(run_id) for run_id in run_ids}
        threads: set[str] = set()
        buckets = {self.layout.run_bucket(run_id) for run_id in doomed}
        for name in sorted(buckets | {self.layout.by_run(run_id) for run_id in doomed}):  # by_run: the earlier layout
            run = self.store.run(name)
            for commit_id in run.ids():
                entry = run.get(commit_id)
                thread = entry.state
                if name in buckets and entry.metadata.get("run_id") not in doomed:
                    continue  # another run_id in the same bucket
                if isinstance(thread, dict) and isinstance(thread.get("thread_id"), str):
                    threads.add(thread["thread_id"])

        def plan(spaces: Spaces) -> Plan | None:
            kept: Plan = {}
            dropped = False
            for where in spaces:
                kept[where.ns] = []
                for item in self.generations.items(where):
                    run_id = self._metadata(where, item).get("run_id")
                    if run_id is not None and str(run_id) in doomed:
                        dropped = True
                    else:
                        kept[where.ns].append(item)
            return kept if dropped else None

        for thread in sorted(threads):
            self.generations.rewrite(thread, "delete_for_runs", plan)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        source, target = str(source_thread_id), str(target_thread_id)
        for where in self.generations.spaces(self.store.runs(), source, self.generations.current(source)[0]):
            for item in self.generations.items(where):
                run_id = self._metadata(where, item).get("run_id")
                if run_id is not None:
                    self._index_run(str(run_id), target)  # before the copy, as put does

        def plan(spaces: Spaces) -> Plan | None:
            merged: Plan = {where.ns: self.generations.items(where) for where in spaces}
            copied = False
            for where in self.generations.spaces(self.store.runs(), source, self.generations.current(source)[0]):
                present = {item.checkpoint_id for item in merged.get(where.ns, [])}
                for item in self.generations.items(where):
                    if item.checkpoint_id not in present:
                        merged.setdefault(where.ns, []).append(item)
                        copied = True
            return merged if copied else None

        self.generations.rewrite(target, "copy_thread", plan)

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """`keep_latest` keeps the latest checkpoint of each namespace (with its writes); `delete` keeps nothing."""
        if strategy not in ("keep_latest", "delete"):
            raise ValueError(f"unknown prune strategy {strategy!r}: use 'keep_latest' or 'delete'")
        for thread_id in thread_ids:
            if strategy == "delete":
                self.delete_thread(thread_id)
            else:
                self.generations.rewrite(str(thread_id), "prune", self.generations.keep_latest)

    def _metadata(self, where: Namespace, item: Item) -> Any:
        return records.load_typed(self.serde, self.generations.checkpoints(where).get(str(item.commit_id)), "metadata")

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

    async def aget_delta_channel_history(self, *, config: RunnableConfig, channels: Sequence[str]) -> Mapping[str, DeltaChannelHistory]:
        return await asyncio.to_thread(self.get_delta_channel_history, config=config, channels=channels)

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
