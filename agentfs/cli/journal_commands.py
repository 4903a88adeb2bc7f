"""`agentfs journal RUN` (alias `timeline`): a run's journaled tool calls, or each of their records."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Callable
from typing import Any

from ..core.calls import IN_FLIGHT, Call, calls_of, describe_error
from ..errors import AgentFSError, NotFound
from ..format.journal import ERROR, OK, START, Record
from . import output
from .common import OK as EXIT_OK
from .common import Subparsers, add_json_flag, open_existing

PREVIEW_WIDTH = 60


def register(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser(
        "journal", aliases=["timeline"], help="a run's journaled tool calls: when, status, duration, result or error"
    )
    parser.add_argument("run", metavar="RUN")
    parser.add_argument("--events", action="store_true", help="one line per record (start, ok, error) instead of one per call")
    add_json_flag(parser)
    parser.set_defaults(handler=cmd_journal)


def cmd_journal(args: argparse.Namespace) -> int:
    journal_log = logging.getLogger("agentfs.journal")
    if not journal_log.handlers:  # damaged records are printed below, prefixed; logging's last resort would print them bare too
        journal_log.addHandler(logging.NullHandler())
    with open_existing(args) as store:
        run = store.run(args.run)
        journal = run.journal
        records = journal.records()
        damaged = journal.damaged
        if not records and not damaged and run.head_id() is None:
            raise NotFound(f"run {args.run!r} not found: it has no journal and no checkpoints")
        calls = calls_of(records)
        for _record_id, why in damaged:
            print(f"agentfs: warning: skipped {why}", file=sys.stderr)
        if args.json:
            document: dict[str, Any] = {"run": run.name, "damaged": [{"id": i, "error": why} for i, why in damaged]}
            if args.events:
                document["events"] = [_event_json(record) for record in records]
            else:
                document["calls"] = [_call_json(call) for call in calls]
            output.emit_json(document)
        elif not records:
            output.line(f"run {run.name!r} has no journal records (no tool calls went through once, tool_call or tool)")
        elif args.events:
            rows = [[r.id, output.when(r.created_at), r.kind, r.key, r.name, _event_detail(r)] for r in records]
            output.table([["ID", "TIME", "EVENT", "KEY", "TOOL", "DETAIL"], *rows] if rows else [])
        else:
            rows = [[output.when(c.started), _status(c), c.key, c.name, _took(c), _outcome(c)] for c in calls]
            output.table([["STARTED", "STATUS", "KEY", "TOOL", "TOOK", "OUTCOME"], *rows] if rows else [])
    return EXIT_OK


def _read(get: Callable[[], Any], unreadable: list[str]) -> Any:
    """The decoded value, or None with the reason noted (e.g. a class registered only in the agent's process)."""
    try:
        return get()
    except AgentFSError as exc:
        unreadable.append(str(exc))
        return None


def _call_json(call: Call) -> dict[str, Any]:
    unreadable: list[str] = []
    recorded = call.status == OK and call.unrecorded is None
    return {
        "key": call.key,
        "name": call.name,
        "status": call.status,
        "attempts": call.attempts,
        "started": output.iso(call.started),
        "finished": None if call.finished is None else output.iso(call.finished),
        "seconds": _seconds(call),
        "writer": call.writer,
        "start_id": call.start_id,
        "end_id": call.end_id,
        "args": _read(lambda: call.args, unreadable),
        "result": _read(lambda: call.result, unreadable) if recorded else None,
        "unrecorded": call.unrecorded,
        "error": call.error,
        "unreadable": unreadable,
    }


def _event_json(record: Record) -> dict[str, Any]:
    unreadable: list[str] = []
    event: dict[str, Any] = {
        "id": record.id,
        "kind": record.kind,
        "key": record.key,
        "call": record.call,
        "name": record.name,
        "created": output.iso(record.created_at),
        "writer": record.writer,
    }
    if record.kind == START:
        event["args"] = _read(lambda: record.value("args"), unreadable)
    elif record.kind == OK:
        event["result"] = _read(lambda: record.value("result"), unreadable) if record.result is not None else None
        event["unrecorded"] = record.unrecorded
    else:
        event["error"] = record.error
    event["unreadable"] = unreadable
    return event


def _status(call: Call) -> str:
    status = "in flight" if call.status == IN_FLIGHT else call.status
    return status if call.attempts == 1 else f"{status} (attempt {call.attempts})"


def _seconds(call: Call) -> float | None:
    return None if call.finished is None else (call.finished - call.started).total_seconds()


def _took(call: Call) -> str:
    seconds = _seconds(call)
    if seconds is None:
        return "-"
    if seconds < 1:
        return f"{seconds * 1000:.0f} ms"
    return f"{seconds:.1f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def _outcome(call: Call) -> str:
    if call.status == IN_FLIGHT:
        return f"started by {call.writer['host']} pid {call.writer['pid']}, no end recorded"
    if call.status == ERROR:
        return _cut(describe_error(call.error))
    if call.unrecorded is not None:
        return _cut(f"(result not recorded: {call.unrecorded})")
    return _preview(lambda: call.result)


def _event_detail(record: Record) -> str:
    if record.kind == START:
        return "args " + _preview(lambda: record.value("args"))
    if record.kind == ERROR:
        return _cut(describe_error(record.error))
    if record.unrecorded is not None:
        return _cut(f"(result not recorded: {record.unrecorded})")
    return _preview(lambda: record.value("result"))


def _preview(get: Callable[[], Any]) -> str:
    try:
        value = get()
    except AgentFSError as exc:
        return _cut(f"(unreadable: {exc})")
    return _cut(json.dumps(output.jsonable(value), default=repr))


def _cut(text: str) -> str:
    return text if len(text) <= PREVIEW_WIDTH else text[: PREVIEW_WIDTH - 3] + "..."
