"""What AdvancedSQLiteSession derives from a branch's items, derived here from the items themselves:
message types and tool names per user turn, tool counts, per-turn usage records, and the pairing of
tool calls with their outputs (the integrity check).

A branch checkpoint may hold a second state key, `usage`: `{turn number (text): record}`, one record
per `store_run_usage` call for that turn (a later call for the same turn replaces it, as the SDK's
INSERT OR REPLACE does). Every change of the branch carries it forward; `clear_session` empties it.
"""

from __future__ import annotations

from typing import Any

from ..tool_pairs import Unpaired, find_unpaired, message_type
from .layout import Entry, is_user_message

__all__ = ["Unpaired", "find_unpaired"]

Usage = dict[str, dict[str, Any]]
USAGE = "usage"
# the SDK's tool call types (AdvancedSQLiteSession.get_tool_usage) and the types that name no tool
TOOL_CALLS = frozenset(
    {
        "tool_call",
        "function_call",
        "computer_call",
        "file_search_call",
        "web_search_call",
        "code_interpreter_call",
        "tool_search_call",
        "custom_tool_call",
        "mcp_call",
        "mcp_approval_request",
        "shell_call",
        "apply_patch_call",
    }
)
_NAMED_BY_TYPE = {"computer_call", "file_search_call", "web_search_call", "code_interpreter_call", "shell_call", "apply_patch_call"}


def tool_name(item: Any) -> str | None:
    """The tool an item calls, named as the SDK's AdvancedSQLiteSession names it (namespaces aside)."""
    if not isinstance(item, dict):
        return None
    kind = item.get("type")
    if kind in ("mcp_call", "mcp_approval_request") and "server_label" in item:
        label, name = item.get("server_label"), item.get("name")
        return f"{label}.{name}" if label and name else str(label or name) if (label or name) else None
    if kind in ("tool_search_call", "tool_search_output"):
        return "tool_search"
    if kind in _NAMED_BY_TYPE:
        return str(kind)
    name = item.get("name")
    return None if name is None else str(name)


def turn_numbers(entries: list[Entry]) -> list[int]:
    """The user turn of each item: 0 before the first user message, then 1, 2, ... from each user message on."""
    turn, numbers = 0, []
    for _added, item in entries:
        turn += is_user_message(item)
        numbers.append(turn)
    return numbers


def conversation_by_turns(entries: list[Entry]) -> dict[int, list[dict[str, str | None]]]:
    turns: dict[int, list[dict[str, str | None]]] = {}
    for number, (_added, item) in zip(turn_numbers(entries), entries, strict=True):
        turns.setdefault(number, []).append({"type": message_type(item), "tool_name": tool_name(item)})
    return turns


def tool_usage(entries: list[Entry]) -> list[tuple[str, int, int]]:
    """(tool name, calls, turn) for each tool called in each turn, by turn then name (SQLite's GROUP BY order)."""
    counts: dict[tuple[int, str], int] = {}
    for number, (_added, item) in zip(turn_numbers(entries), entries, strict=True):
        name = tool_name(item)
        if message_type(item) in TOOL_CALLS and name is not None:
            counts[(number, name)] = counts.get((number, name), 0) + 1
    return [(name, count, number) for (number, name), count in sorted(counts.items())]


def usage_record(usage: Any) -> dict[str, Any]:
    """The SDK's `Usage` as the fields AdvancedSQLiteSession keeps of it."""

    def details(value: Any) -> dict[str, Any] | None:
        return dict(value.__dict__) if value else None

    return {
        "requests": usage.requests or 0,
        "input_tokens": usage.input_tokens or 0,
        "output_tokens": usage.output_tokens or 0,
        "total_tokens": usage.total_tokens or 0,
        "input_tokens_details": details(getattr(usage, "input_tokens_details", None)),
        "output_tokens_details": details(getattr(usage, "output_tokens_details", None)),
    }


def session_totals(usages: list[Usage]) -> dict[str, int] | None:
    records = [record for usage in usages for record in usage.values()]
    if not records:
        return None
    totals = {field: sum(record[field] for record in records) for field in ("requests", "input_tokens", "output_tokens", "total_tokens")}
    return {**totals, "total_turns": len(records)}
