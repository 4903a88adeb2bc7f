"""The records the saver commits, and checks on what it reads back (a remote's data is untrusted).

A checkpoint commit's state:
    checkpoint   [type, bytes]   self.serde of the LangGraph checkpoint without its channel_values
    metadata     [type, bytes]   self.serde of the checkpoint metadata
    blobs        {channel: [version, commit id or None]}: where each channel's value is; None = here
and, for each channel written at this checkpoint, one of
    v:<channel>  [type, bytes]             the value
    l:<channel>  [[type, bytes], ...]      a list, item by item
    d:<channel>  [base, count, depth, [[type, bytes], ...]]   a list that is the `count` items of
                 the list in commit `base` (same run) followed by these; `depth` deltas since a full l:
Its agentfs metadata is {"checkpoint_id", "parent_checkpoint_id"} (LangGraph ids), plus "thread_id"
and "checkpoint_ns" when the run name holds their hash.

A list that grew by a few items is stored as a delta, so a step costs its new items; every
SNAPSHOT_EVERY-th version is stored whole, so a read follows at most that many commits, and the
whole list's chunks, cut by content, mostly repeat the previous full copy's.

A put_writes commit's state: {"task_id", "task_path", "writes": [[idx, channel, [type, bytes]], ...]}.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from langgraph.checkpoint.base import SerializerProtocol

from ...errors import FormatError
from ...names import check_id
from ...store.checkpoint import Checkpoint as Commit

VALUE, ITEMS, DELTA = "v:", "l:", "d:"
SNAPSHOT_EVERY = 16
Typed = tuple[str, bytes]
Blobs = dict[str, tuple[Any, str | None]]
WriteRow = tuple[int, str, Typed]
Get = Callable[[str], Commit]


def typed(raw: Any, where: str) -> Typed:
    if isinstance(raw, (list, tuple)) and len(raw) == 2 and isinstance(raw[0], str) and isinstance(raw[1], bytes):
        return raw[0], raw[1]
    raise FormatError(f"{where}: not a serialized value")


def serialize(serde: SerializerProtocol, value: Any) -> Typed | list[Typed]:
    """A channel value as self.serde makes it: whole, or item by item for a list."""
    if type(value) is list:
        return [serde.dumps_typed(item) for item in value]
    return serde.dumps_typed(value)


def list_record(commit: Commit, channel: str) -> tuple[str, Any] | None:
    """(key, stored record) of `channel` in `commit` if it holds the channel as a list, else None."""
    for key in (ITEMS + channel, DELTA + channel):
        if key in commit.manifest.state:
            return key, commit._value(key)
    return None


def depth(key: str, record: Any) -> int:
    return record[2] if key.startswith(DELTA) and isinstance(record, list) and len(record) == 4 and type(record[2]) is int else 0


def joined(key: str, record: Any, channel: str, get: Get, where: str) -> list[Typed]:
    """The items an l: or d: record stands for, following the bases of deltas through `get`."""
    deltas: list[tuple[int, list[Typed]]] = []
    for _ in range(4 * SNAPSHOT_EVERY):
        if not isinstance(record, list):
            raise FormatError(f"{where}: malformed list record")
        if key.startswith(ITEMS):
            items = [typed(item, where) for item in record]
            for count, new in reversed(deltas):
                if len(items) != count:
                    raise FormatError(f"{where}: a delta extends {count} items of a list that has {len(items)}")
                items += new
            return items
        if not (len(record) == 4 and isinstance(record[0], str) and type(record[1]) is int and isinstance(record[3], list)):
            raise FormatError(f"{where}: malformed list delta")
        deltas.append((record[1], [typed(item, where) for item in record[3]]))
        base = get(check_id(record[0]))
        found = list_record(base, channel)
        if found is None:
            raise FormatError(f"{where}: delta base {base} holds no list for channel {channel!r}")
        key, record = found
        where = f"{base} channel {channel!r}"
    raise FormatError(f"{where}: chain of list deltas is too long")


def standalone(commit: Commit, channel: str, get: Get) -> dict[str, Any]:
    """The state key holding `channel` in `commit`, a delta joined into a whole list."""
    found = list_record(commit, channel)
    if found is not None:
        return {ITEMS + channel: [list(item) for item in joined(*found, channel, get, f"{commit} channel {channel!r}")]}
    if VALUE + channel in commit.manifest.state:
        return {VALUE + channel: commit._value(VALUE + channel)}
    raise FormatError(f"{commit} holds no value for channel {channel!r}")


def load_value(serde: SerializerProtocol, commit: Commit, channel: str, get: Get) -> Any:
    ((key, raw),) = standalone(commit, channel, get).items()
    where = f"{commit} channel {channel!r}"
    if key.startswith(ITEMS):
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
