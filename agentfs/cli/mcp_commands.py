"""`agentfs mcp`: serve the store to MCP clients, on stdio or streamable HTTP (needs the mcp extra)."""

from __future__ import annotations

import argparse

from .common import OK, Subparsers, open_existing


def register(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser("mcp", help="serve the store to MCP clients: stdio, or streamable HTTP with --http (extra: mcp)")
    parser.add_argument(
        "--http", metavar="HOST:PORT", type=address, help="serve streamable HTTP at http://HOST:PORT/mcp (port 0: a free port)"
    )
    parser.add_argument(
        "--read-only", action="store_true", help="offer only the tools that read; commit, fork and write_artifact are refused"
    )
    parser.set_defaults(handler=cmd_mcp)


def address(text: str) -> tuple[str, int]:
    host, colon, port = text.rpartition(":")
    host = host.removeprefix("[").removesuffix("]")  # [::1]:8000
    if not colon or not host or not port.isdigit() or int(port) > 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not HOST:PORT (e.g. 127.0.0.1:8000)")
    return host, int(port)


def cmd_mcp(args: argparse.Namespace) -> int:
    # the SDK is an optional dependency: importing the CLI must not need it; without it, MissingExtra names the pip line
    from ..integrations.mcp_server import serve

    with open_existing(args) as store:
        serve(store, read_only=args.read_only, http=args.http)
    return OK
