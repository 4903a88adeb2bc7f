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
Its agentfs metadata is {"checkpoint_id", "parent_checkpoint_id", "inline_writes": true} (LangGraph
ids; the mark says its writes follow it in its run, see namespace_log.py), plus "thread_id" and
"checkpoint_ns" when the run name holds their hash.

A list that grew by a few items is stored as a delta, so a step costs its new items; every
SNAPSHOT_EVERY-th version is stored whole, so a read follows at most that many commits, and the
whole list's chunks, cut by content, mostly repeat the previous full copy's.

A put_writes commit's state is one value, [task_id, task_path, [[idx, channel, [type, bytes]], ...]] (one key to
encode, store and list in the entry; a batch is always read whole); one written by an earlier saver is the mapping
{"task_id", "task_path", "writes"} of the same parts, read alike. Its agentfs metadata is {"checkpoint_id",
"writes": true} in a checkpoints run, {"checkpoint_id"} in a late run.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from operator import itemgetter
from typing import Any

from langgraph.checkpoint.base import WRITES_IDX_MAP, SerializerProtocol, writes_sort_key
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from ...core.checkpoint import Checkpoint as Commit
from ...errors import FormatError, InvalidName
from ...names import check_id

VALUE, ITEMS, DELTA = "v:", "l:", "d:"
SNAPSHOT_EVERY = 16
Typed = tuple[str, bytes]
Blobs = dict[str, tuple[Any, str | None]]
WriteRow = tuple[int, str, Typed]
Get = Callable[[str], Commit]
Read = Callable[[Commit, str], Any]  # a commit's state value by key
OWN_KEYS = ("checkpoint", "metadata", "blobs")  # the keys of a checkpoint commit that hold no caller's object
RECENT_VALUES = 4096  # small state values kept decoded (each inline or packed: at most PACK_MAX bytes)


def own_value(commit: Commit, key: str) -> Any:
    return commit.value(key)


class CommitValues:
    """`read` for the functions below: small state values (inline or packed in the entry) as agentfs decoded them
    (sha256 checked, decompressed, msgpack read) or as the saver committed them, the RECENT_VALUES last read or
    committed kept; a commit never changes, so neither do they. Hazard: callers share what it returns and must not
    change it. Safe to share between threads."""

    def __init__(self) -> None:
        self._recent: OrderedDict[tuple[str, str, str], Any] = OrderedDict()
        self._lock = threading.Lock()

    def __call__(self, commit: Commit, key: str) -> Any:
        cache_key = (commit.run, commit.id, key)
        with self._lock:
            if cache_key in self._recent:
                self._recent.move_to_end(cache_key)
                return self._recent[cache_key]
        value = commit.value(key)
        self._keep(commit, key, value)
        return value

    def remember(self, commit: Commit, values: dict[str, Any]) -> None:
        """Keep state values just committed as `commit`, so they are not read back. Each must be, type for type, what
        reading it back gives (the saver's records: dicts, lists, str, int, None, bytes) and the saver's own object,
        never a caller's: a caller could change theirs later."""
        for key, value in values.items():
            self._keep(commit, key, value)

    def _keep(self, commit: Commit, key: str, value: Any) -> None:
        if commit.value_in_entry(key):
            with self._lock:
                self._recent[(commit.run, commit.id, key)] = value
                if len(self._recent) > RECENT_VALUES:
                    self._recent.popitem(last=False)


def batch_state(commit: Commit, read: Read) -> Any:
    """A put_writes commit's state through `read`: its one value (key ""), or (an earlier saver's) its mapping key by
    key (task_id, task_path, writes)."""
    if commit.has_value(""):
        return read(commit, "")
    return {key: read(commit, key) for key in commit.value_keys()}


def new_write_batch(serde: SerializerProtocol, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str) -> list[Any]:
    """A put_writes commit's state. Each value's data is bytes of its own: serde hands a bytearray value over as
    itself, which its caller may change after the saver remembered the batch (read back, either form loads the same)."""
    rows = []
    for idx, (channel, value) in enumerate(writes):
        kind, data = serde.dumps_typed(value)
        rows.append([WRITES_IDX_MAP.get(channel, idx), channel, [kind, bytes(data)]])
    return [task_id, task_path, rows]


def typed(raw: Any, where: str) -> Typed:
    # serde may hand over a bytearray (its "bytearray" type), which agentfs gives back as a bytearray
    if isinstance(raw, (list, tuple)) and len(raw) == 2 and isinstance(raw[0], str) and isinstance(raw[1], (bytes, bytearray)):
        return raw[0], bytes(raw[1])
    raise FormatError(f"{where}: not a serialized value")


def list_record(commit: Commit, channel: str) -> tuple[str, Any] | None:
    """(key, stored record) of `channel` in `commit` if it holds the channel as a list, else None."""
    for key in (ITEMS + channel, DELTA + channel):
        if commit.has_value(key):
            return key, commit.value(key)
    return None


def extend(key: str, record: Any, where: str, base: Callable[[str], list[Typed]]) -> tuple[list[Typed], int]:
    """(items, delta depth) of an l: or d: record; `base(commit id)` gives the items a delta extends."""
    if key.startswith(ITEMS):
        return whole_list(record, where), 0
    base_id, count, depth, added = delta(record, where)
    return extended(base(base_id), count, added, where), depth


def whole_list(record: Any, where: str) -> list[Typed]:
    """The items of an l: record."""
    if not isinstance(record, list):
        raise FormatError(f"{where}: malformed list record")
    return typed_items(record, where)


def typed_items(raw: list[Any], where: str) -> list[Typed]:
    """`typed` of each item of `raw`: checked in C when every one is a [str, bytes] list, as the saver wrote it and
    agentfs reads it back (a fresh read's 1,200 messages: 0.2 ms against 0.4 ms item by item)."""
    if (
        set(map(type, raw)) <= {list}
        and set(map(len, raw)) <= {2}
        and set(map(type, map(itemgetter(0), raw))) <= {str}
        and set(map(type, map(itemgetter(1), raw))) <= {bytes}
    ):
        return list(map(tuple, raw))
    return [typed(item, where) for item in raw]


def delta(record: Any, where: str) -> tuple[str, int, int, list[Typed]]:
    """(base commit id, how many of its items it extends, depth, the items it adds) of a d: record."""
    if not (
        isinstance(record, list)
        and len(record) == 4
        and isinstance(record[0], str)
        and type(record[1]) is int
        and type(record[2]) is int
        and isinstance(record[3], list)
    ):
        raise FormatError(f"{where}: malformed list record")
    try:
        base = check_id(record[0])
    except InvalidName:
        raise FormatError(f"{where}: a list delta's base {record[0][:40]!r} is not a commit id") from None
    return base, record[1], record[2], typed_items(record[3], where)


def extended(items: list[Typed], count: int, added: list[Typed], where: str) -> list[Typed]:
    """A delta's list: `items` (its base's), which must be `count` long, followed by `added`."""
    if len(items) != count:
        raise FormatError(f"{where}: a delta extends {count} items of a list that has {len(items)}")
    return items + added


def resolver(get: Get, channel: str, hops: int = 0) -> Callable[[str], list[Typed]]:
    """`base` for `extend`: the items of `channel` in a commit, reading every delta down to a whole list."""

    def items(commit_id: str) -> list[Typed]:
        if hops > 4 * SNAPSHOT_EVERY:
            raise FormatError(f"commit {commit_id}: chain of list deltas is too long")
        commit = get(commit_id)
        found = list_record(commit, channel)
        if found is None:
            raise FormatError(f"{commit}: a list delta's base holds no list for channel {channel!r}")
        return extend(*found, f"{commit} channel {channel!r}", resolver(get, channel, hops + 1))[0]

    return items


def standalone(commit: Commit, channel: str, get: Get) -> dict[str, Any]:
    """The state key holding `channel` in `commit`, a delta joined into a whole list."""
    found = list_record(commit, channel)
    if found is not None:
        items = extend(*found, f"{commit} channel {channel!r}", resolver(get, channel))[0]
        return {ITEMS + channel: [list(item) for item in items]}
    return {VALUE + channel: whole(commit, channel)}


def whole(commit: Commit, channel: str, read: Read = own_value) -> Any:
    if not commit.has_value(VALUE + channel):
        raise FormatError(f"{commit} holds no value for channel {channel!r}")
    return read(commit, VALUE + channel)


def load_items(serde: SerializerProtocol, items: list[Typed]) -> list[Any]:
    if items and type(serde).loads_typed is JsonPlusSerializer.loads_typed and all(kind == "msgpack" for kind, _data in items):
        # a msgpack array is its items' msgpack back to back: one call decodes them all, each as it would alone
        return serde.loads_typed(("msgpack", array_header(len(items)) + b"".join(data for _kind, data in items)))  # type: ignore[no-any-return]
    return [serde.loads_typed(item) for item in items]


def array_header(count: int) -> bytes:
    if count < 16:
        return bytes((0x90 | count,))
    if count < 1 << 16:
        return b"\xdc" + count.to_bytes(2, "big")
    return b"\xdd" + count.to_bytes(4, "big")


def load_typed(serde: SerializerProtocol, commit: Commit, key: str, read: Read = own_value) -> Any:
    if not commit.has_value(key):
        raise FormatError(f"{commit} is not a LangGraph checkpoint (no {key!r})")
    return serde.loads_typed(typed(read(commit, key), f"{commit} {key}"))


def blobs(raw: Any, where: str) -> Blobs:
    valid = isinstance(raw, dict) and all(
        isinstance(ref, list) and len(ref) == 2 and (ref[1] is None or isinstance(ref[1], str)) for ref in raw.values()
    )
    if not valid:
        raise FormatError(f"{where}: malformed channel locations")
    return {channel: (ref[0], ref[1]) for channel, ref in raw.items()}


def commit_blobs(commit: Commit, read: Read = own_value) -> Blobs:
    if not commit.has_value("blobs"):
        raise FormatError(f"{commit} is not a LangGraph checkpoint (no channel locations)")
    return blobs(read(commit, "blobs"), str(commit))


def ids(commit: Commit) -> tuple[str, str | None]:
    """(LangGraph checkpoint id, its parent's id) of a checkpoint commit."""
    meta = commit.metadata
    if isinstance(meta, dict) and isinstance(meta.get("checkpoint_id"), str):
        parent = meta.get("parent_checkpoint_id")
        if parent is None or isinstance(parent, str):
            return meta["checkpoint_id"], parent
    raise FormatError(f"{commit} is not a LangGraph checkpoint (no checkpoint id)")


def inline_writes(commit: Commit) -> bool:
    """Whether a checkpoint commit's writes follow it in its run (else, the earlier layout, in their own run)."""
    return isinstance(commit.metadata, dict) and commit.metadata.get("inline_writes") is True


def pending_writes(batches: list[Any], where: str) -> list[tuple[str, str, Typed]]:
    """(task_id, channel, serialized value) of write batches (oldest first), deduplicated, in writes_sort_key order."""
    found: dict[tuple[str, int], tuple[str, str, int, str, Typed]] = {}
    for state in batches:
        task_id, task_path, rows = write_batch(state, where)
        for idx, channel, value in rows:
            if idx >= 0 and (task_id, idx) in found:
                continue  # a regular write is stored once; special ones (negative idx) are replaced
            found[(task_id, idx)] = (task_path, task_id, idx, channel, value)
    ordered = sorted(found.values(), key=lambda row: writes_sort_key(row[0], row[1], row[2]))
    return [(task_id, channel, value) for _path, task_id, _idx, channel, value in ordered]


def write_batch(state: Any, where: str) -> tuple[str, str, list[WriteRow]]:
    """(task_id, task_path, rows) of a put_writes commit's state, in either form (module docstring)."""
    if isinstance(state, dict):  # an earlier saver's mapping
        state = [state.get("task_id"), state.get("task_path"), state.get("writes")]
    if isinstance(state, list) and len(state) == 3:
        task_id, task_path, rows = state
        if (
            isinstance(task_id, str)
            and isinstance(task_path, str)
            and isinstance(rows, list)
            and all(isinstance(row, list) and len(row) == 3 and type(row[0]) is int and isinstance(row[1], str) for row in rows)
        ):
            return task_id, task_path, [(row[0], row[1], typed(row[2], where)) for row in rows]
    raise FormatError(f"{where}: not a LangGraph write batch")
