"""`agentfs`: build the parser from the command modules, run one command, map errors to exit codes."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from types import ModuleType

import agentfs

from ..errors import AgentFSError, InvalidName, NotFound, ObjectMissing
from . import (
    core_commands,
    journal_commands,
    mcp_commands,
    output,
    retention_commands,
    stats_commands,
    sync_commands,
    ui_commands,
    upgrade_commands,
)
from .common import DEFAULT_STORE, FAILED, INTERRUPTED, NOT_FOUND, STDOUT_CLOSED, STORE_ENV, USAGE

# Each module has `register(subparsers)`, which adds its subcommands and sets `handler`
# (args -> exit code) on each; another module's commands join by being listed here.
COMMAND_MODULES: tuple[ModuleType, ...] = (
    core_commands,
    sync_commands,
    retention_commands,
    journal_commands,
    stats_commands,
    mcp_commands,
    upgrade_commands,
    ui_commands,
)

EPILOG = f"""\
A checkpoint is named RUN (the run's head) or RUN@ID.
The store is --store PATH, else ${STORE_ENV}, else ./{DEFAULT_STORE}.

exit codes:
  0    ok
  1    verify found problems; diff found differences (as diff(1) does); upgrade skipped damaged records
  2    usage error: bad arguments, or an invalid run name, artifact name or checkpoint id
  3    not found: the store, a run, a checkpoint or an artifact
  4    any other error: corrupt or missing data, a malformed record, a conflict, an I/O error
  130  interrupted (Ctrl-C)
  141  stdout was closed before all was written (e.g. `agentfs cat ... | head`), as for SIGPIPE
Errors are printed to stderr as `agentfs: error: <message>`."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="agentfs",
        description="Keep an AI agent's state and files safe, and resume anywhere.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--store", metavar="PATH", help=f"the store directory (default: ${STORE_ENV}, else ./{DEFAULT_STORE})")
    parser.add_argument("--version", action="version", version=f"agentfs {agentfs.__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    for module in COMMAND_MODULES:
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)  # exits with USAGE on a bad command line
    try:
        code: int = args.handler(args)
        output.flush()
        return code
    except output.StdoutClosed:
        output.silence()
        return STDOUT_CLOSED
    except KeyboardInterrupt:
        return INTERRUPTED
    except InvalidName as exc:
        return _fail(exc, USAGE)
    except ObjectMissing as exc:  # the checkpoint exists but its data does not: damage, not a bad name
        return _fail(exc, FAILED)
    except NotFound as exc:
        return _fail(exc, NOT_FOUND)
    except (AgentFSError, OSError) as exc:
        return _fail(exc, FAILED)


def _fail(exc: BaseException, code: int) -> int:
    print(f"agentfs: error: {exc}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
