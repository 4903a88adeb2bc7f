"""stats: checkpoints and bytes per run, dedup ratio, journal size, sync lag per remote."""

from __future__ import annotations

import argparse
import datetime as dt
from typing import Any

from ..api import StoreStats
from ..core.stats import RunStats
from ..integrations.langgraph_threads import ThreadSummary
from . import output, thread_view
from .common import OK, Subparsers, add_json_flag, open_existing
from .sync_commands import pushed_at, remote_json


def _run_json(row: RunStats) -> dict[str, Any]:
    return {
        "run": row.run,
        "checkpoints": row.checkpoints,
        "first": _iso(row.first),
        "last": _iso(row.last),
        "logical_bytes": row.logical_bytes,
        "entry_bytes": row.entry_bytes,
        "journal_records": row.journal_records,
        "journal_bytes": row.journal_bytes,
    }


def _thread_json(summary: ThreadSummary, runs: list[RunStats]) -> dict[str, Any]:
    return {
        **thread_view.thread_json(summary),
        "logical_bytes": sum(row.logical_bytes for row in runs),
        "entry_bytes": sum(row.entry_bytes for row in runs),
    }


def _iso(moment: dt.datetime | None) -> str | None:
    return None if moment is None else output.iso(moment)


def _totals_json(found: StoreStats) -> dict[str, Any]:
    return {
        "runs": len(found.runs),
        "checkpoints": found.checkpoints,
        "objects": found.objects,
        "object_bytes": found.object_bytes,
        "entry_bytes": found.entry_bytes,
        "stored_bytes": found.stored_bytes,
        "logical_bytes": found.logical_bytes,
        "dedup_ratio": None if found.dedup_ratio is None else round(found.dedup_ratio, 3),
        "journal_records": found.journal_records,
        "journal_bytes": found.journal_bytes,
    }


def cmd_stats(args: argparse.Namespace) -> int:
    store = open_existing(args)
    found = store.stats()
    names, threads = thread_view.split(store, args)
    shown = set(names)
    rows = [row for row in found.runs if row.run in shown]
    by_run = {row.run: row for row in found.runs}
    thread_rows = [(summary, [by_run[name] for name in summary.runs if name in by_run]) for summary in threads]
    if args.json:
        document = {
            "store": str(store.root),
            "runs": [_run_json(row) for row in rows],
            "totals": _totals_json(found),
            "remotes": [remote_json(remote) for remote in found.remotes],
        }
        if thread_rows:  # only then: a store without LangGraph threads reads as it always has
            document["threads"] = [_thread_json(summary, runs) for summary, runs in thread_rows]
        output.emit_json(document)
        return OK
    if rows:
        output.table(
            [["RUN", "CHECKPOINTS", "FIRST", "LAST", "LOGICAL", "ENTRIES", "JOURNAL"]]
            + [
                [
                    row.run,
                    str(row.checkpoints),
                    "-" if row.first is None else output.when(row.first),
                    "-" if row.last is None else output.when(row.last),
                    output.size(row.logical_bytes),
                    output.size(row.entry_bytes),
                    f"{row.journal_records} ({output.size(row.journal_bytes)})" if row.journal_records else "-",
                ]
                for row in rows
            ]
        )
        output.line()
    if thread_rows:
        output.table(
            [[*thread_view.THREAD_HEADER, "LOGICAL", "ENTRIES"]]
            + [
                [
                    *thread_view.thread_row(summary),
                    output.size(sum(row.logical_bytes for row in runs)),
                    output.size(sum(row.entry_bytes for row in runs)),
                ]
                for summary, runs in thread_rows
            ]
        )
        output.line()
    ratio = "-" if found.dedup_ratio is None else f"{found.dedup_ratio:.2f}x"
    among = f", {output.count(len(threads), 'LangGraph thread')} among them" if threads else ""
    output.line(f"checkpoints  {found.checkpoints} in {output.count(len(found.runs), 'run')}{among}")
    output.line(f"objects      {found.objects} ({output.size(found.object_bytes)} on disk)")
    output.line(f"entries      {output.size(found.entry_bytes)}")
    output.line(f"logical      {output.size(found.logical_bytes)}")
    output.line(f"dedup        {ratio} (logical / objects and entries on disk)")
    output.line(f"journal      {output.count(found.journal_records, 'record')} ({output.size(found.journal_bytes)})")
    if found.remotes:
        output.line()
        output.table(
            [["REMOTE", "PUSHED", "LAG", "LAST PUSH", "LAST ERROR"]]
            + [
                [
                    remote.url,
                    str(remote.pushed_checkpoints),
                    f"{remote.lag_checkpoints} ({remote.lag_seconds:.1f} s)",
                    pushed_at(remote.last_push),
                    remote.last_error or "-",
                ]
                for remote in found.remotes
            ]
        )
    return OK


def register(subparsers: Subparsers) -> None:
    stats = subparsers.add_parser("stats", help="checkpoints and size per run, dedup ratio, journal size, sync lag per remote")
    add_json_flag(stats)
    thread_view.add_thread_flags(stats)
    stats.set_defaults(handler=cmd_stats)
