"""The records the saver commits, and checks on what it reads back (a remote's data is untrusted).

A checkpoint commit's state:
    checkpoint   [type, bytes]   self.serde of the LangGraph checkpoint without its channel_values
    metadata     [type, bytes]   self.serde of the checkpoint metadata
    blobs        {channel: [version, commit id or None]}: where each channel's value is; None = here
    v:<channel>  [type, bytes]   the value of a channel written at this checkpoint, or, for a list,
    l:<channel>  [[type, bytes], ...]  its items one by one, so an appended list changes only its tail
and its agentfs metadata is {"checkpoint_id": ..., "parent_checkpoint_id": ...} (the LangGraph ids).

A put_writes commit's state: {"task_id", "task_path", "writes": [[idx, channel, [type, bytes]], ...]}.
"""

from __future__ import annotations

from typing import Any

from langgraph.checkpoint.base import SerializerProtocol

from ...errors import FormatError
from ...store.checkpoint import Checkpoint as Commit

VALUE, ITEMS = "v:", "l:"
Blobs = dict[str, tuple[Any, str | None]]
WriteRow = tuple[int, str, tuple[str, bytes]]


def typed(raw: Any, where: str) -> tuple[str, bytes]:
    if isinstance(raw, list) and len(raw) == 2 and isinstance(raw[0], str) and isinstance(raw[1], bytes):
        return raw[0], raw[1]
    raise FormatError(f"{where}: not a serialized value")


def dump_value(serde: SerializerProtocol, channel: str, value: Any) -> dict[str, Any]:
    """The state keys holding one channel's value."""
    if type(value) is list:
        return {ITEMS + channel: [list(serde.dumps_typed(item)) for item in value]}
    return {VALUE + channel: list(serde.dumps_typed(value))}


def raw_value(commit: Commit, channel: str) -> dict[str, Any]:
    """The state key holding `channel` in `commit`, with its stored (still serialized) value."""
    for key in (ITEMS + channel, VALUE + channel):
        if key in commit.manifest.state:
            return {key: commit._value(key)}
    raise FormatError(f"{commit} holds no value for channel {channel!r}")


def load_value(serde: SerializerProtocol, commit: Commit, channel: str) -> Any:
    ((key, raw),) = raw_value(commit, channel).items()
    where = f"{commit} channel {channel!r}"
    if key.startswith(ITEMS):
        if not isinstance(raw, list):
            raise FormatError(f"{where}: not a list of serialized items")
        return [serde.loads_typed(typed(item, where)) for item in raw]
    return serde.loads_typed(typed(raw, where))


def load_typed(serde: SerializerProtocol, commit: Commit, key: str) -> Any:
    if key not in commit.manifest.state:
        raise FormatError(f"{commit} is not a LangGraph checkpoint (no {key!r})")
    return serde.loads_typed(typed(commit._value(key), f"{commit} {key}"))


def blobs(raw: Any, where: str) -> Blobs:
    valid = isinstance(raw, dict) and all(
        isinstance(ref, list) and len(ref) == 2 and (ref[1] is None or isinstance(ref[1], str)) for ref in raw.values()
    )
    if not valid:
        raise FormatError(f"{where}: malformed channel locations")
    return {channel: (ref[0], ref[1]) for channel, ref in raw.items()}


def commit_blobs(commit: Commit) -> Blobs:
    if "blobs" not in commit.manifest.state:
        raise FormatError(f"{commit} is not a LangGraph checkpoint (no channel locations)")
    return blobs(commit._value("blobs"), str(commit))


def ids(commit: Commit) -> tuple[str, str | None]:
    """(LangGraph checkpoint id, its parent's id) of a checkpoint commit."""
    meta = commit.metadata
    if isinstance(meta, dict) and isinstance(meta.get("checkpoint_id"), str):
        parent = meta.get("parent_checkpoint_id")
        if parent is None or isinstance(parent, str):
            return meta["checkpoint_id"], parent
    raise FormatError(f"{commit} is not a LangGraph checkpoint (no checkpoint id)")


def write_batch(state: Any, where: str) -> tuple[str, str, list[WriteRow]]:
    """(task_id, task_path, rows) of a put_writes commit."""
    if isinstance(state, dict) and isinstance(state.get("task_id"), str) and isinstance(state.get("task_path"), str):
        rows = state.get("writes")
        if isinstance(rows, list) and all(
            isinstance(row, list) and len(row) == 3 and type(row[0]) is int and isinstance(row[1], str) for row in rows
        ):
            return state["task_id"], state["task_path"], [(row[0], row[1], typed(row[2], where)) for row in rows]
    raise FormatError(f"{where}: not a LangGraph write batch")
