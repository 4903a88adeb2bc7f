"""A conversation as the CLI (`agentfs thread`, `agentfs session`), the MCP tool `read_conversation` and
`agentfs ui` show it, and an OpenAI Agents session's items read as one (a LangGraph thread's: langgraph_conversation.py)."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from ..api import Store
from ..errors import FormatError, NotFound

# AgentFSSession's default prefix and first branch (openai_agents/session.py; importing that package needs the SDK)
SESSION_PREFIX = "openai-agents"
MAIN = "main"


@dataclasses.dataclass
class Message:
    """One turn: who spoke (human, ai, tool, system, or an item's role/type), its text, and tool calls or the call it answers."""

    role: str
    text: str
    tool_calls: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    tool_call_id: str | None = None
    name: str | None = None


@dataclasses.dataclass
class Step:
    """A checkpoint of the thread: its LangGraph id, step, source, the nodes that ran and the channels they wrote."""

    checkpoint_id: str
    step: Any
    source: Any
    writes: list[str]
    nodes: list[str] = dataclasses.field(default_factory=list)  # the nodes that ran in the step that made it


@dataclasses.dataclass
class Conversation:
    kind: str  # "thread" or "session"
    name: str
    at: str | None  # the checkpoint shown (LangGraph id or agentfs id)
    messages: list[Message]
    steps: list[Step] = dataclasses.field(default_factory=list)
    interrupts: list[Any] = dataclasses.field(default_factory=list)
    next_nodes: list[str] = dataclasses.field(default_factory=list)

    def as_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [part.get("text") if isinstance(part, dict) else part for part in content]
        return "\n".join(part if isinstance(part, str) else json.dumps(part, ensure_ascii=False, default=repr) for part in parts)
    return json.dumps(content, ensure_ascii=False, default=repr)


def message_of(value: Any) -> Message:
    if not isinstance(value, dict):
        return Message("value", text_of(value))
    role = str(value.get("type") or value.get("role") or value.get("__type__") or "item")
    calls = value.get("tool_calls")
    tool_calls = (
        [{"name": call.get("name"), "args": call.get("args"), "id": call.get("id")} for call in calls if isinstance(call, dict)]
        if isinstance(calls, list)
        else []
    )
    call_id = value.get("tool_call_id") or value.get("call_id")
    name = value.get("name")
    text = value.get("content") if "content" in value else value.get("output", value.get("arguments", ""))
    return Message(role, text_of(text), tool_calls, call_id if isinstance(call_id, str) else None, name if isinstance(name, str) else None)


def session_runs(store: Store, session: str) -> dict[str, str]:
    """branch -> run of each branch of an OpenAI Agents session, from the metadata its commits carry."""
    found = {}
    for name in store.runs():
        head = store.run(name).latest() if name.startswith(SESSION_PREFIX + "/") else None
        if head is not None and head.metadata.get("session_id") == session and isinstance(head.metadata.get("branch"), str):
            found[head.metadata["branch"]] = name
    return found


def session_conversation(store: Store, session: str, *, branch: str = MAIN, checkpoint_id: str | None = None) -> Conversation:
    """The items of an OpenAI Agents session's `branch` at `checkpoint_id` (default: the branch's head)."""
    name = session_runs(store, session).get(branch)
    if name is None:
        raise NotFound(f"OpenAI Agents session {session!r} has no branch {branch!r} under {SESSION_PREFIX!r}")
    run = store.run(name)
    checkpoint = run.get(checkpoint_id) if checkpoint_id else run.latest()
    if checkpoint is None:
        raise NotFound(f"OpenAI Agents session {session!r} (branch {branch!r}): run {name!r} has no checkpoints")
    state = checkpoint.state
    entries = state.get("items") if isinstance(state, dict) else None
    if not isinstance(entries, list):
        raise FormatError(f"checkpoint {checkpoint} is not an OpenAI Agents session checkpoint (no item list)")
    messages = [message_of(entry[1] if isinstance(entry, list) and len(entry) == 2 else entry) for entry in entries]
    steps = [Step(commit.id, index, commit.metadata.get("operation"), []) for index, commit in enumerate(reversed(run.history(50)))]
    return Conversation("session", session, checkpoint.id, messages, steps)
