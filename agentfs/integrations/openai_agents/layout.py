"""Where an OpenAI Agents SDK session lives in a store, and what its checkpoints hold.

    <prefix>/<session>/<branch>      one run per branch of a session; the first branch is `main`

`<session>` and `<branch>` are the id itself when it is a valid run name segment (and not `log`,
reserved by agentfs, nor shaped like a hashed one), else `h` and the sha256 of the id. Every
commit's metadata names the session and branch, so a hashed name is never needed back.

A checkpoint's state is `{"items": [[added, item], ...]}`: the branch's items in order, each with
the unix second it was added. The list is one state key, which agentfs cuts with FastCDC, so a
commit that appends stores the list's new tail chunk and the tree nodes above it, not the list.
"""

from __future__ import annotations

import json
from typing import Any

import agentfs

from ..run_names import segment

MAIN = "main"
ITEMS = "items"

Entry = list[Any]  # [added (unix seconds), item]


def session_root(prefix: str, session_id: str) -> str:
    return f"{prefix}/{segment(session_id)}"


def branch_run(prefix: str, session_id: str, branch: str) -> str:
    return f"{session_root(prefix, session_id)}/{segment(branch)}"


def entries_of(checkpoint: agentfs.Checkpoint) -> list[Entry]:
    """The [added, item] pairs a session checkpoint holds; anything else in the run is refused by name."""
    state = checkpoint.state
    entries = state.get(ITEMS) if isinstance(state, dict) else None
    if not (isinstance(entries, list) and all(isinstance(e, list) and len(e) == 2 for e in entries)):
        raise agentfs.FormatError(f"checkpoint {checkpoint.id} of run {checkpoint.run!r} is not an OpenAI Agents session checkpoint")
    return entries


def is_user_message(item: Any) -> bool:
    """A user turn starts at each user message, as in the SDK's AdvancedSQLiteSession."""
    return isinstance(item, dict) and item.get("role") == "user"


def turn_positions(entries: list[Entry]) -> list[int]:
    """The index of each turn's user message: turn n (from 1) starts at positions[n - 1]."""
    return [index for index, (_added, item) in enumerate(entries) if is_user_message(item)]


def preview(content: Any, max_length: int | None = None) -> str:
    """A user message's content as text (structured parts as JSON), cut to `max_length` characters."""
    text = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)
    return text[:max_length] + "..." if max_length is not None and len(text) > max_length else text


def texts(content: Any) -> list[str]:
    """The searchable text of a message's content: the string, or each part's text."""
    if isinstance(content, str):
        return [content]
    if isinstance(content, list):
        return [part["text"] for part in content if isinstance(part, dict) and isinstance(part.get("text"), str)]
    return []
