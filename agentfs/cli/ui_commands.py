"""`agentfs ui` (a local web page over a store or a remote), `agentfs thread` and `agentfs session` (a
conversation on the terminal)."""

from __future__ import annotations

import argparse
import getpass
import sys
import tempfile

import agentfs

from ..extras import needs_extra
from ..redaction import redact_url
from . import thread_view
from .common import OK, USAGE, Subparsers, add_json_flag, open_existing, storage_options, store_path


def register(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser("ui", help="a local web page to browse, compare and (with --allow-writes) steer runs")
    parser.add_argument("--remote", metavar="URL", help="browse this remote lazily, read-only, instead of the local store")
    parser.add_argument("--storage-options", metavar="JSON", help="fsspec options for --remote")
    parser.add_argument(
        "--host",
        default="127.0.0.1",
        help="address to listen on (default 127.0.0.1: this machine only; 0.0.0.0 answers to this machine's addresses and names)",
    )
    parser.add_argument(
        "--allow-host",
        metavar="NAME",
        action="append",
        default=[],
        help="also answer to this DNS name in the Host header (a name the machine is reached by; repeatable)",
    )
    parser.add_argument("--port", type=int, default=0, help="port (default 0: a free one); the URL is the first line printed")
    parser.add_argument("--allow-writes", action="store_true", help="offer fork, edit, abandon and notes (recorded with --user)")
    parser.add_argument("--user", default=None, help="who acts, recorded with each action (default: the OS user)")
    parser.set_defaults(handler=run_ui)

    thread = subparsers.add_parser("thread", help="a LangGraph thread's messages, tool calls and interrupts")
    thread.add_argument("thread", metavar="THREAD", help="the thread id")
    thread.add_argument("--checkpoint", metavar="ID", help="a LangGraph checkpoint id (default: the latest)")
    thread.add_argument("--ns", default="", help="the checkpoint namespace (default: the root graph)")
    add_json_flag(thread)
    thread.set_defaults(handler=thread_view.show_thread)

    session = subparsers.add_parser("session", help="an OpenAI Agents session's items as a conversation")
    session.add_argument("session", metavar="NAME", help="the session id")
    session.add_argument("--branch", default="main", help="the branch (default: main)")
    session.add_argument("--checkpoint", metavar="ID", help="a checkpoint of the branch's run (default: its head)")
    add_json_flag(session)
    session.set_defaults(handler=thread_view.show_session)


def run_ui(args: argparse.Namespace) -> int:
    # the extra is optional: importing the CLI must not need it; without it, MissingExtra names the pip line (as for `agentfs mcp`)
    with needs_extra("ui", "agentfs ui"):
        from ..ui.app import Settings
        from ..ui.serve import serve
    user = args.user or getpass.getuser()
    if args.remote is not None:
        if args.allow_writes:
            print("agentfs: error: --allow-writes does not apply to --remote: a remote is browsed read-only", file=sys.stderr)
            return USAGE
        with tempfile.TemporaryDirectory(prefix="agentfs-ui-") as scratch:
            store = agentfs.open(scratch, remote=args.remote, storage_options=storage_options(args.storage_options))
            with store:
                serve(store, args.host, args.port, Settings(False, user, redact_url(args.remote)), tuple(args.allow_host))
        return OK
    with open_existing(args) as store:
        serve(store, args.host, args.port, Settings(args.allow_writes, user, str(store_path(args))), tuple(args.allow_host))
    return OK
