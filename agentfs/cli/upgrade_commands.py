"""upgrade: convert a format-1 store to format 2 in place (engine/upgrade.py)."""

from __future__ import annotations

import argparse
import sys

from ..engine.upgrade import FORMAT1_NAMES, FROM, TO, UpgradeReport, upgrade
from . import output
from .common import DIFFERENT, OK, Subparsers, add_json_flag, store_path

NOUNS = {"object": "object", "entry": "checkpoint", "journal": "journal record", "retired": "retirement record", "fork": "fork marker"}


def register(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser(
        "upgrade", help=f"convert a format-{FROM} store to format {TO} in place (crash-safe; stop every process using it first)"
    )
    parser.add_argument("path", nargs="?", metavar="PATH", help="the store (default: --store, $AGENTFS_STORE, else ./.agentfs)")
    parser.add_argument("--dry-run", action="store_true", help="read and verify every record and report; change nothing")
    add_json_flag(parser)
    parser.set_defaults(handler=cmd_upgrade)


def cmd_upgrade(args: argparse.Namespace) -> int:
    root = store_path(argparse.Namespace(store=args.path or args.store))
    report = upgrade(root, dry_run=args.dry_run)
    for problem in report.damaged:
        print(f"agentfs: warning: skipped damaged record: {problem}", file=sys.stderr)
    if args.json:
        output.emit_json(report.to_json())
    else:
        for line in _lines(report):
            output.line(line)
    return DIFFERENT if report.damaged else OK


def _lines(report: UpgradeReport) -> list[str]:
    """One line per step taken (with --dry-run, per step it would take)."""

    def did(verb: str, done: str) -> str:
        return f"would {verb}" if report.dry_run else done

    if report.found_format == TO:
        lines = [f"removed what an interrupted upgrade left of format {FROM}: {', '.join(report.removed)}"] if report.removed else []
        return [*lines, f"{report.root} is a format-{TO} store: nothing to upgrade"]
    lines = []
    if report.discarded_segments:
        lines.append("discarded segments/ left by an interrupted upgrade")
    counts = ", ".join(output.count(report.converted[kind], noun) for kind, noun in NOUNS.items() if report.converted[kind]) or "nothing"
    damaged = f"; skipped {output.count(len(report.damaged), 'damaged record')}" if report.damaged else ""
    lines.append(f"{did('convert', 'converted')} {counts} ({output.size(report.converted_bytes)}) into segments/{damaged}")
    if report.dropped_remotes:
        remotes = output.count(len(report.dropped_remotes), f"format-{FROM} remote")
        lines.append(f"{did('drop', 'dropped')} remotes/ (what was pushed to {remotes}: a cache, never read by format {TO})")
    lines.append(f"{did('set', 'set')} the config's format to {TO} (the commit point)")
    removed = report.removed or ["/".join(parts) for parts in FORMAT1_NAMES]
    lines.append(f"{did('remove', 'removed')} the format-{FROM} files: " + ", ".join(removed))
    return lines
