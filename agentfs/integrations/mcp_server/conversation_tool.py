"""The MCP tool `read_conversation`: a LangGraph thread's messages or an OpenAI Agents session's items, decoded, as
`agentfs thread` and `agentfs session` print them (read_state gives a thread's internal runs and raw msgpack writes)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

import agentfs

from ..conversations import session_conversation
from ..langgraph_conversation import thread_conversation
from .tools import Arguments, ToolSpec


class ConversationArguments(Arguments):
    kind: Literal["thread", "session"] = Field(description="'thread': a LangGraph thread id; 'session': an OpenAI Agents session id")
    name: str = Field(description="the thread id or session id")
    checkpoint: str | None = Field(
        default=None, description="a LangGraph checkpoint id, or a session branch's checkpoint id (default: latest)"
    )
    namespace: str = Field(default="", description="a LangGraph checkpoint namespace (default: the root graph)")
    branch: str = Field(default="main", description="a session's branch")


def read_conversation(store: agentfs.Store, args: ConversationArguments) -> dict[str, Any]:
    if args.kind == "thread":
        return thread_conversation(store, args.name, checkpoint_id=args.checkpoint, ns=args.namespace).as_json()
    return session_conversation(store, args.name, branch=args.branch, checkpoint_id=args.checkpoint).as_json()


CONVERSATION_TOOL = ToolSpec(
    "read_conversation",
    "A LangGraph thread's messages (human, ai, tool; tool calls; pending interrupts; each step) or an OpenAI Agents "
    "session's items, as a conversation at a checkpoint (default: the latest).",
    ConversationArguments,
    read_conversation,
    read_only=True,
)
