"""The pairing of tool calls with their outputs in an OpenAI Agents SDK session (no SDK import: `agentfs verify` uses it).

The model API refuses a history holding a tool output whose call is not before it, or a call whose
output never follows (the SDK's sessions can be left so by a crash or an edit): `find_unpaired` finds
both; `AgentFSSession.repair_tool_pairs()` removes them in one checkpoint; `agentfs verify` reports
them in every session of the store (`openai_agents_problems`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import agentfs

SESSIONS_PREFIX = "openai-agents/"  # AgentFSSession's default prefix (openai_agents/session.py PREFIX)
# a call whose output is a separate item, and that output's type: the pairs the integrity check matches by call_id
OUTPUT_OF = {
    "function_call": "function_call_output",
    "custom_tool_call": "custom_tool_call_output",
    "computer_call": "computer_call_output",
    "local_shell_call": "local_shell_call_output",
    "shell_call": "shell_call_output",
    "apply_patch_call": "apply_patch_call_output",
}
CALL_OF = {output: call for call, output in OUTPUT_OF.items()}


def message_type(item: Any) -> str:
    if isinstance(item, dict):
        if item.get("role") in ("user", "assistant"):
            return str(item["role"])
        if item.get("type"):
            return str(item["type"])
    return "other"


@dataclasses.dataclass(frozen=True)
class Unpaired:
    """An item that breaks the tool call/output pairing the model API requires (see `find_unpaired`)."""

    position: int  # index of the item in the branch
    kind: str  # "output without call" or "call without output"
    call_id: str
    item_type: str


def find_unpaired(entries: list[list[Any]]) -> list[Unpaired]:
    """Tool outputs with no earlier call of that call_id, and calls with no later output: a session holding
    either is refused by the model API on the next turn."""
    found: list[Unpaired] = []
    open_calls: dict[tuple[str, str], int] = {}  # (output type expected, call_id) -> position of the call
    for position, (_added, item) in enumerate(entries):
        kind = message_type(item)
        call_id = item.get("call_id") if isinstance(item, dict) else None
        if not isinstance(call_id, str):
            continue
        if kind in OUTPUT_OF:
            open_calls[(OUTPUT_OF[kind], call_id)] = position
        elif kind in CALL_OF and open_calls.pop((kind, call_id), None) is None:
            found.append(Unpaired(position, "output without call", call_id, kind))
    found += [Unpaired(position, "call without output", call_id, CALL_OF[output]) for (output, call_id), position in open_calls.items()]
    return sorted(found, key=lambda unpaired: unpaired.position)


def openai_agents_problems(store: agentfs.Store) -> list[tuple[str, Unpaired]]:
    """(run, finding) for every unpaired tool item at the head of every OpenAI Agents session branch in the store."""
    found = []
    for name in store.runs():
        head = store.run(name).latest() if name.startswith(SESSIONS_PREFIX) else None
        state = None if head is None else head.state
        items = state.get("items") if isinstance(state, dict) else None
        if isinstance(items, list) and all(isinstance(entry, list) and len(entry) == 2 for entry in items):
            found += [(name, unpaired) for unpaired in find_unpaired(items)]
    return found
