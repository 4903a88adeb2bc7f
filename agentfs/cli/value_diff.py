"""The value view of `agentfs diff`: what changed inside each state value, one short line per change."""

from __future__ import annotations

import json
from typing import Any

import agentfs

from . import output

PREVIEW = 100  # characters of one value shown
MAX_LINES = 8  # change lines shown per state key


def value_view(a: agentfs.Checkpoint, b: agentfs.Checkpoint, state: dict[str, list[dict[str, Any]]]) -> list[str]:
    """Lines for the state keys `state` (a diff section) names: added and removed values, and changed ones item by item."""
    lines = [f"+ {item['name'] or '(state)'}: {_preview(_read(b, item['name']))}" for item in state["added"]]
    lines += [f"- {item['name'] or '(state)'}: {_preview(_read(a, item['name']))}" for item in state["removed"]]
    for item in state["changed"]:
        changes = _changes(_read(a, item["name"]), _read(b, item["name"]))
        if len(changes) > MAX_LINES:
            changes = [*changes[: MAX_LINES - 1], f"... {len(changes) - MAX_LINES + 1} more lines"]
        lines += [f"~ {item['name'] or '(state)'}:", *("    " + change for change in changes)]
    return lines


def _read(checkpoint: agentfs.Checkpoint, key: str) -> Any:
    try:
        return checkpoint.value(key)
    except agentfs.AgentFSError as exc:  # e.g. a class registered only in the agent's process
        return _Unreadable(str(exc))


class _Unreadable:
    def __init__(self, reason: str) -> None:
        self.reason = reason

    def __repr__(self) -> str:
        return f"<unreadable: {self.reason}>"


def _preview(value: Any) -> str:
    """One line of JSON (repr() for what JSON has no type for), cut to PREVIEW characters."""
    text = json.dumps(output.jsonable(value), default=repr, ensure_ascii=False)
    return text if len(text) <= PREVIEW else text[: PREVIEW - 3] + "..."


def _same(x: Any, y: Any) -> bool:
    try:
        return type(x) is type(y) and bool(x == y)
    except (TypeError, ValueError):  # numpy arrays compare element-wise
        return repr(x) == repr(y)


def _index(key: Any) -> str:
    return f"[{json.dumps(key, ensure_ascii=False)}]" if isinstance(key, str) else f"[{key!r}]"


def _changes(a: Any, b: Any) -> list[str]:
    """`- old` / `+ new` lines: per item after a common prefix for two lists, per key for two dicts."""
    if type(a) is list and type(b) is list:
        kept = 0
        while kept < min(len(a), len(b)) and _same(a[kept], b[kept]):
            kept += 1
        lines = [f"  [0:{kept}] unchanged ({output.count(kept, 'item')})"] if kept else []
        lines += [f"- [{index}] {_preview(item)}" for index, item in enumerate(a[kept:], kept)]
        return lines + [f"+ [{index}] {_preview(item)}" for index, item in enumerate(b[kept:], kept)]
    if type(a) is dict and type(b) is dict:
        lines = []
        for key in [*a, *(key for key in b if key not in a)]:
            if key in a and (key not in b or not _same(a[key], b[key])):
                lines.append(f"- {_index(key)} {_preview(a[key])}")
            if key in b and (key not in a or not _same(a[key], b[key])):
                lines.append(f"+ {_index(key)} {_preview(b[key])}")
        return lines
    return [f"- {_preview(a)}", f"+ {_preview(b)}"]
