"""prune, delete, retention and gc: what a store (or a remote) keeps, and what it lets go."""

from __future__ import annotations

import argparse
import dataclasses
import re
import sys
from typing import Any

from ..core.retention import PruneReport
from ..errors import NotFound
from ..sync.pack_remote import PackRemote
from ..sync.remote_gc import MIN_SETTLE, RECHECK, SETTLE, remote_gc
from . import output
from .common import OK, USAGE, Subparsers, UsageError, add_json_flag, open_existing, positive_count, remote_url, seconds, storage_options

UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def duration(text: str) -> float:
    """Seconds, or a number with a unit: 90, 45s, 30m, 12h, 7d, 2w."""
    match = re.fullmatch(r"(\d+(?:\.\d+)?)([smhdw]?)", text.strip())
    if match is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration (e.g. 3600, 30m, 12h, 7d)")
    return float(match.group(1)) * UNITS[match.group(2) or "s"]


def _settle(text: str) -> float:
    value = seconds(text)
    if value < MIN_SETTLE:
        raise argparse.ArgumentTypeError(f"{text!r}: must be at least {MIN_SETTLE:g} s (pushers look at gc/ every {RECHECK:g} s)")
    return value


def _add_keep_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--keep-last", type=positive_count, metavar="N", help="keep the newest N checkpoints")
    parser.add_argument("--keep-within", type=duration, metavar="DURATION", help="keep checkpoints younger than this (30m, 12h, 7d)")


def register(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser("prune", help="remove a run's older checkpoints (never the head, nor what kept ones need)")
    parser.add_argument("run", metavar="RUN")
    _add_keep_arguments(parser)
    add_json_flag(parser)
    parser.set_defaults(handler=cmd_prune)

    parser = subparsers.add_parser("delete", help="remove a run: its checkpoints (but what other runs need) and its journal")
    parser.add_argument("run", metavar="RUN")
    add_json_flag(parser)
    parser.set_defaults(handler=cmd_delete)

    parser = subparsers.add_parser("retention", help="show or set the store-wide policy that gc applies to every run")
    _add_keep_arguments(parser)
    parser.add_argument("--clear", action="store_true", help="remove the policy")
    add_json_flag(parser)
    parser.set_defaults(handler=cmd_retention)

    parser = subparsers.add_parser("gc", help="apply the retention policy, then delete objects no checkpoint references")
    parser.add_argument(
        "--grace", type=seconds, default=3600.0, metavar="SECONDS", help="keep objects touched this recently (default: 3600)"
    )
    parser.add_argument("--no-policy", action="store_true", help="do not apply the retention policy first")
    parser.add_argument("--remote", metavar="URL", type=remote_url, help="collect garbage on this remote instead (safe while others push)")
    parser.add_argument("--storage-options", metavar="JSON", help="fsspec storage options for --remote, as JSON")
    parser.add_argument("--settle", type=_settle, metavar="SECONDS", help=f"with --remote: let pushers see gc first (default {SETTLE:.0f})")
    add_json_flag(parser)
    parser.set_defaults(handler=cmd_gc)


def _report(report: PruneReport, args: argparse.Namespace) -> None:
    if args.json:
        output.emit_json(dataclasses.asdict(report))
        return
    line = f"{report.run}: removed {output.count(len(report.removed), 'checkpoint')}, kept {report.kept}"
    if report.needed:
        line += f" ({len(report.needed)} only because kept checkpoints need them)"
    if report.journal_removed:
        line += f", removed {output.count(report.journal_removed, 'journal record')}"
    output.line(line + "; `agentfs gc` frees their objects")


def cmd_prune(args: argparse.Namespace) -> int:
    if args.keep_last is None and args.keep_within is None:
        print("agentfs: error: prune needs --keep-last N, --keep-within DURATION or both", file=sys.stderr)
        return USAGE
    with open_existing(args) as store:
        _report(store.run(args.run).prune(keep_last=args.keep_last, keep_within=args.keep_within), args)
    return OK


def cmd_delete(args: argparse.Namespace) -> int:
    with open_existing(args) as store:
        run = store.run(args.run)
        if not run.ids() and not run.journal.records():
            raise NotFound(f"run {run.name!r} not found: it has no checkpoints and no journal")
        _report(run.delete(), args)
    return OK


def cmd_retention(args: argparse.Namespace) -> int:
    if args.clear and (args.keep_last is not None or args.keep_within is not None):
        raise UsageError("retention: --clear removes the policy; it does not go with --keep-last or --keep-within")
    with open_existing(args) as store:
        if args.clear or args.keep_last is not None or args.keep_within is not None:
            store.set_retention(None if args.clear else args.keep_last, None if args.clear else args.keep_within)
        current = store.retention()
    if args.json:
        output.emit_json({"retention": current})
    elif current is None:
        output.line("no retention policy: gc keeps every checkpoint")
    else:
        rules = [f"the newest {current['keep_last']}" if current.get("keep_last") else "", _within(current.get("keep_within"))]
        output.line("gc keeps, in every run but langgraph/ threads: " + " and ".join(r for r in rules if r) + ", and the head")
    return OK


def _within(value: Any) -> str:
    return "" if value is None else f"those younger than {value:g}s"


def cmd_gc(args: argparse.Namespace) -> int:
    if args.remote is None and (args.storage_options is not None or args.settle is not None):
        raise UsageError("gc: --storage-options and --settle go with --remote URL")
    if args.remote is not None and args.no_policy:
        raise UsageError("gc: --no-policy is for the local gc; gc --remote applies no retention policy")
    if args.remote is not None:
        with open_existing(args) as store:
            remote = PackRemote(args.remote, storage_options(args.storage_options))
            settle = SETTLE if args.settle is None else args.settle
            # store.engine: remote gc is sync's function (gc --remote is its front-end)
            report = remote_gc(remote, store.engine, grace=args.grace, settle=settle, progress=not args.quiet)
        if args.json:
            output.emit_json(dataclasses.asdict(report))
        else:
            output.line(
                f"{remote.url}: deleted {output.count(report.entries_deleted, 'retired checkpoint')}, "
                f"{output.count(report.journal_deleted, 'journal record')}, {output.count(report.objects_deleted, 'object')} "
                f"({output.size(report.bytes_freed)}); kept {output.count(report.kept_young, 'young unreferenced object')}"
            )
        return OK
    with open_existing(args) as store:
        report_local = store.gc(grace=args.grace, policy=not args.no_policy)
    if args.json:
        output.emit_json(dataclasses.asdict(report_local))
    else:
        local = report_local
        pruned = f"pruned {output.count(local.pruned, 'checkpoint')} by the retention policy, " if local.pruned else ""
        freed = output.size(local.bytes_freed)
        deleted = output.count(local.deleted, "object")
        output.line(f"{pruned}deleted {deleted} ({freed}), kept {local.kept}, removed {output.count(local.temp_deleted, 'temp file')}")
    for damaged in report_local.damaged:
        print(f"agentfs: warning: no object deleted: damaged checkpoint {damaged} (repair: agentfs verify --repair)", file=sys.stderr)
    return OK
