"""The read side of AgentFSSaver: a checkpoint commit (with its write batches) as LangGraph's CheckpointTuple,
a channel's value wherever its channel locations put it, and the delta channel history along the parent chain."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import Checkpoint, CheckpointTuple, DeltaChannelHistory, PendingWrite, SerializerProtocol

from ...core.checkpoint import Checkpoint as Commit
from ...core.run import Run
from . import list_values, records
from .list_values import ListValues
from .namespace_log import NamespaceLog


def checkpoint_tuple(
    serde: SerializerProtocol,
    lists: ListValues,
    read: records.Read,
    log: NamespaceLog,
    commit: Commit,
    batches: list[Any],
    metadata: Any = None,
) -> CheckpointTuple:
    """The checkpoint of `commit` whose write batches are `batches` (`metadata`: already loaded, or None)."""
    checkpoint_id, parent_id = records.ids(commit)
    blobs = records.commit_blobs(commit, read)
    values = {channel: channel_value(serde, lists, read, log.run, commit, channel, holder) for channel, (_version, holder) in blobs.items()}
    checkpoint = records.load_typed(serde, commit, "checkpoint", read)
    where = log.where
    writes = records.pending_writes(batches, f"{log.run.name} {checkpoint_id}")
    return CheckpointTuple(
        config=config_of(where.thread, where.ns, checkpoint_id),
        checkpoint=cast(Checkpoint, {**checkpoint, "channel_values": values}),
        metadata=records.load_typed(serde, commit, "metadata", read) if metadata is None else metadata,
        parent_config=config_of(where.thread, where.ns, parent_id) if parent_id else None,
        pending_writes=[(task_id, channel, serde.loads_typed(value)) for task_id, channel, value in writes],
    )


def channel_value(
    serde: SerializerProtocol, lists: ListValues, read: records.Read, run: Run, commit: Commit, channel: str, holder: str | None
) -> Any:
    """The value of `channel` at checkpoint `commit`, whose channel locations name `holder` for it."""
    listed = lists.kept(run.name, holder or commit.id, channel)
    if listed is None:
        source = commit if holder is None else run.get(holder)
        listed = None if source.has_value(records.VALUE + channel) else lists.recall(serde, run, source.id, channel)
        if listed is None:
            return serde.loads_typed(records.typed(records.whole(source, channel, read), str(commit)))
    return list_values.load(serde, listed)


def delta_channel_history(
    serde: SerializerProtocol, lists: ListValues, read: records.Read, log: NamespaceLog, checkpoint_id: str | None, channels: Sequence[str]
) -> Mapping[str, DeltaChannelHistory]:
    """For each channel, the writes made to it since the checkpoint before `checkpoint_id` (None: the latest) that
    holds it, oldest first, and that value as the seed."""
    index = log.find(checkpoint_id) if checkpoint_id else log.latest()
    collected: dict[str, list[PendingWrite]] = {channel: [] for channel in channels}
    seeds: dict[str, Any] = {}
    remaining = set(channels)
    parent_id = None if index is None else records.ids(log.commit(index))[1]
    while parent_id is not None and remaining and (index := log.find(parent_id)) is not None:
        commit = log.commit(index)
        writes = records.pending_writes(log.write_batches(index), f"{log.run.name} {parent_id}")
        for task_id, channel, value in reversed(writes):
            if channel in remaining:
                collected[channel].append((task_id, channel, serde.loads_typed(value)))
        for channel, (_version, holder) in records.commit_blobs(commit, read).items():
            if channel in remaining:
                seeds[channel] = channel_value(serde, lists, read, log.run, commit, channel, holder)
                remaining.discard(channel)
        parent_id = records.ids(commit)[1]
    history: dict[str, DeltaChannelHistory] = {}
    for channel in channels:
        history[channel] = {"writes": collected[channel][::-1]}
        if channel in seeds:
            history[channel]["seed"] = seeds[channel]
    return history


def config_of(thread: str, ns: str, checkpoint_id: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread, "checkpoint_ns": ns, "checkpoint_id": checkpoint_id}}
