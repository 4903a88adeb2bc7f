"""The value view of `agentfs diff`: what changed inside each state value, one short line per change."""

from __future__ import annotations

import json
from typing import Any

import agentfs

from ..core.value_changes import value_changes
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


def _index(key: Any) -> str:
    return f"[{json.dumps(key, ensure_ascii=False)}]" if isinstance(key, str) else f"[{key!r}]"


def _changes(a: Any, b: Any) -> list[str]:
    return value_changes(a, b, _preview, _index, lambda kept: output.count(kept, "item"))
