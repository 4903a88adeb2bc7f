"""JSON renderings of what a store holds, for MCP clients: stored values of any type, checkpoints, journal calls.

A state may hold any type agentfs stores (bytes, datetimes, numpy arrays, registered dataclasses...), and
a client reads JSON. `jsonable` maps each value to its nearest JSON form: bytes become
{"$bytes": base64}, sequences and sets lists, datetimes ISO 8601, numpy values their `tolist()`,
dataclasses and pydantic models their fields, and anything else its repr(). A `Preview` cuts long
strings, sequences, mappings and nesting so a whole state fits in a client's context.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import enum
import json
import math
from collections.abc import Callable, Mapping
from typing import Any

import agentfs

BYTES_KEY = "$bytes"


@dataclasses.dataclass(frozen=True)
class Preview:
    """How much of a value a rendering keeps; `None` everywhere keeps all of it."""

    chars: int | None = None  # characters of a str (bytes: of its base64)
    items: int | None = None  # items of a sequence or mapping
    depth: int | None = None  # nesting levels shown; deeper values become a summary string


FULL = Preview()
SHORT = Preview(chars=200, items=20, depth=4)


def jsonable(value: Any, preview: Preview = FULL) -> Any:
    """`value` as JSON-compatible data (dict with str keys, list, str, int, float, bool, None)."""
    return _render(value, preview, 0)


def _render(value: Any, preview: Preview, depth: int) -> Any:
    if value is None or isinstance(value, (bool, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)  # JSON has no nan or inf
    if isinstance(value, str):
        return _cut(value, preview.chars)
    if isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
        return {BYTES_KEY: _cut(base64.b64encode(data).decode("ascii"), preview.chars), "size": len(data)}
    if isinstance(value, enum.Enum):
        return _render(value.value, preview, depth)
    if isinstance(value, (dt.datetime, dt.date, dt.time)):
        return value.isoformat()
    if hasattr(value, "tolist") and callable(value.tolist):  # numpy arrays and scalars
        return _render(value.tolist(), preview, depth)
    if hasattr(value, "model_dump") and callable(value.model_dump):  # pydantic models
        return _render(value.model_dump(mode="python"), preview, depth)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _render({field.name: getattr(value, field.name) for field in dataclasses.fields(value)}, preview, depth)
    if isinstance(value, Mapping):
        if preview.depth is not None and depth >= preview.depth:
            return f"(mapping of {len(value)} items)"
        items = list(value.items())
        shown = items if preview.items is None else items[: preview.items]
        rendered = {_key(key): _render(item, preview, depth + 1) for key, item in shown}
        if len(shown) < len(items):
            rendered["..."] = f"{len(items) - len(shown)} more items"
        return rendered
    if isinstance(value, (list, tuple, set, frozenset)):
        if preview.depth is not None and depth >= preview.depth:
            return f"({type(value).__name__} of {len(value)} items)"
        items = list(value)
        shown = items if preview.items is None else items[: preview.items]
        listed = [_render(item, preview, depth + 1) for item in shown]
        if len(shown) < len(items):
            listed.append(f"... {len(items) - len(shown)} more items")
        return listed
    return _cut(repr(value), preview.chars)  # timedelta, UUID, Decimal and the like


def _key(key: Any) -> str:
    return key if isinstance(key, str) else repr(key)


def _cut(text: str, limit: int | None) -> str:
    if limit is None or len(text) <= limit:
        return text
    return text[:limit] + f"... ({len(text) - limit} more characters)"


def dumps(document: Any) -> str:
    return json.dumps(document, ensure_ascii=False)


def type_name(value: Any) -> str:
    kind = type(value)
    return kind.__name__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"


def value_summary(value: Any) -> dict[str, Any]:
    """A stored value in brief: its type, the length of its full JSON rendering, and a preview."""
    return {"type": type_name(value), "chars": len(dumps(jsonable(value))), "preview": jsonable(value, SHORT)}


def checkpoint_summary(checkpoint: agentfs.Checkpoint) -> dict[str, Any]:
    """Where a checkpoint sits, its metadata, its state keys and its artifacts with sizes."""
    state = checkpoint.state
    forked = checkpoint.forked_from
    return {
        "ref": str(checkpoint),
        "run": checkpoint.run,
        "id": checkpoint.id,
        "parent": checkpoint.parent,
        "created": checkpoint.created.isoformat(timespec="microseconds"),
        "forked_from": None if forked is None else f"{forked[0]}@{forked[1]}",
        "schema_version": checkpoint.schema_version,
        "metadata": jsonable(checkpoint.metadata, SHORT),
        "state_keys": sorted(state) if _is_mapping(state) else None,
        "artifacts": {name: artifact.size for name, artifact in checkpoint.artifacts.items()},
    }


def state_summary(checkpoint: agentfs.Checkpoint) -> dict[str, Any]:
    """The whole state in brief: each key's summary (or the one value's, for a state that is not a mapping)."""
    state = checkpoint.state
    if _is_mapping(state):
        return {"ref": str(checkpoint), "kind": "mapping", "keys": {key: value_summary(item) for key, item in state.items()}}
    return {"ref": str(checkpoint), "kind": "value", "value": value_summary(state)}


def _is_mapping(state: Any) -> bool:
    return isinstance(state, dict) and all(isinstance(key, str) for key in state)


def call_summary(call: Any) -> dict[str, Any]:
    """One journaled call (an agentfs journal Call): its outcome, with args and result previewed."""
    finished = call.finished
    return {
        "key": call.key,
        "tool": call.name,
        "status": call.status,
        "attempts": call.attempts,
        "started": call.started.isoformat(timespec="microseconds"),
        "finished": None if finished is None else finished.isoformat(timespec="microseconds"),
        "writer": call.writer,
        "args": _readable(lambda: call.args),
        "result": _readable(lambda: call.result) if call.status == "ok" and call.unrecorded is None else None,
        "unrecorded": call.unrecorded,
        "error": call.error,
    }


def _readable(get: Callable[[], Any]) -> Any:
    """A preview of the decoded value, or why it cannot be read (e.g. a class registered only in the agent's process)."""
    try:
        return jsonable(get(), SHORT)
    except agentfs.AgentFSError as exc:
        return {"unreadable": str(exc)}
