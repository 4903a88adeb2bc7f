"""LangGraph threads in `runs`, `stats` and `log`: one row per thread instead of its internal runs."""

from __future__ import annotations

import argparse
import json
from typing import Any

import agentfs

from ..errors import NotFound
from ..extras import needs_extra
from ..integrations.conversations import Conversation, session_conversation
from ..integrations.langgraph_layout import Layout
from ..integrations.langgraph_threads import DEFAULT_PREFIX, ThreadRuns, ThreadSummary, is_write_batch, summarize
from . import output
from .common import OK, open_existing

THREAD_HEADER = ["THREAD", "NAMESPACES", "CHECKPOINTS", "RUNS"]


def add_thread_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--internal", action="store_true", help="also list the internal runs LangGraph threads are kept in")
    parser.add_argument("--langgraph-prefix", default=DEFAULT_PREFIX, metavar="PREFIX", help="where AgentFSSaver keeps threads")


def split(store: agentfs.Store, args: argparse.Namespace) -> tuple[list[str], list[ThreadSummary]]:
    """(the runs to list one by one: all with --internal, else those that are no thread's, the threads)."""
    runs = store.runs()
    threads, internal = summarize(store, runs, args.langgraph_prefix)
    hidden = set() if args.internal else set(internal)
    return [name for name in runs if name not in hidden], threads


def thread_json(summary: ThreadSummary) -> dict[str, Any]:
    latest = summary.latest
    return {
        "thread_id": summary.thread,
        "namespaces": summary.namespaces,
        "checkpoints": summary.checkpoints,
        "latest": latest.id if latest else None,
        "latest_created": output.iso(latest.created) if latest else None,
        "runs": summary.runs,
    }


def thread_row(summary: ThreadSummary) -> list[str]:
    namespaces = ", ".join(repr(ns) if ns else "(root)" for ns in summary.namespaces) or "-"
    return [summary.thread, namespaces, str(summary.checkpoints), str(len(summary.runs))]


def thread_log(store: agentfs.Store, thread: str, prefix: str) -> dict[str, list[dict[str, Any]]]:
    """Per namespace of `thread`, its checkpoints newest first (LangGraph ids, time, the commit that holds it)."""
    threads = ThreadRuns(store, Layout(prefix))
    spaces = threads.spaces(store.runs(), thread, threads.current(thread)[0])
    if not spaces:
        raise NotFound(f"LangGraph thread {thread!r} not found under {prefix!r}: it has no checkpoints")
    log: dict[str, list[dict[str, Any]]] = {}
    for where in sorted(spaces, key=lambda where: where.ns):
        run = store.run(threads.layout.checkpoints(where))
        commits = [commit for commit in run.history() if not is_write_batch(commit)]
        log[where.ns] = [
            {
                "checkpoint_id": commit.metadata.get("checkpoint_id"),
                "parent_checkpoint_id": commit.metadata.get("parent_checkpoint_id"),
                "created": commit.created,
                "run": run.name,
                "commit": commit.id,
            }
            for commit in commits
        ]
    return log


def thread_log_json(thread: str, log: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    namespaces = {ns: [{**entry, "created": output.iso(entry["created"])} for entry in entries] for ns, entries in log.items()}
    return {"thread_id": thread, "namespaces": namespaces}


def print_thread_log(thread: str, log: dict[str, list[dict[str, Any]]]) -> None:
    for ns, entries in log.items():
        output.line(f"thread {thread!r} namespace {ns!r}: {output.count(len(entries), 'checkpoint')} in {entries[0]['run']}")
        for index, entry in enumerate(entries):
            parent = f"parent {entry['parent_checkpoint_id']}" if entry["parent_checkpoint_id"] else "root"
            fields = [entry["checkpoint_id"], output.when(entry["created"]), parent, f"commit {entry['commit']}"]
            output.line("  " + "  ".join([*fields, *(["(latest)"] if index == 0 else [])]))


def _print_conversation(conversation: Conversation) -> None:
    output.line(f"{conversation.kind} {conversation.name!r} at {conversation.at}: {output.count(len(conversation.messages), 'message')}")
    for message in conversation.messages:
        who = message.role + (f" ({message.name})" if message.name else "")
        who += f" -> {message.tool_call_id}" if message.tool_call_id else ""
        output.line(f"[{who}] {message.text}")
        for call in message.tool_calls:
            output.line(f"    calls {call['name']}({json.dumps(call['args'], ensure_ascii=False, default=repr)}) id {call['id']}")
    for interrupt in conversation.interrupts:
        output.line(f"[interrupt] {json.dumps(interrupt, ensure_ascii=False, default=repr)}")


def show_thread(args: argparse.Namespace) -> int:
    """`agentfs thread THREAD`: its messages at the latest (or --checkpoint) LangGraph checkpoint, decoded."""
    # LangGraph is an optional dependency: importing the CLI must not need it; without it, MissingExtra names the pip line
    with needs_extra("langgraph", "agentfs thread"):
        from ..integrations.langgraph_conversation import thread_conversation
    with open_existing(args) as store:
        conversation = thread_conversation(store, args.thread, checkpoint_id=args.checkpoint, ns=args.ns)
    return _show(conversation, args.json)


def show_session(args: argparse.Namespace) -> int:
    """`agentfs session NAME`: an OpenAI Agents session's items at its branch's head (or --checkpoint)."""
    with open_existing(args) as store:
        conversation = session_conversation(store, args.session, branch=args.branch, checkpoint_id=args.checkpoint)
    return _show(conversation, args.json)


def _show(conversation: Conversation, as_json: bool) -> int:
    if as_json:
        output.emit_json(conversation.as_json())
    else:
        _print_conversation(conversation)
    return OK
