"""`agentfs`: build the parser from the command modules, run one command, map errors to exit codes."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from types import ModuleType

import agentfs

from ..api import DEFAULT_STORE, STORE_ENV
from ..errors import AgentFSError, InvalidName, NotFound, ObjectMissing, WrongKey
from ..redaction import scrub
from . import (
    core_commands,
    journal_commands,
    key_commands,
    mcp_commands,
    output,
    retention_commands,
    stats_commands,
    sync_commands,
    ui_commands,
    upgrade_commands,
)
from .common import FAILED, INTERRUPTED, NOT_FOUND, STDOUT_CLOSED, USAGE, WRONG_KEY, UsageError

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
    key_commands,
    ui_commands,
)

EPILOG = f"""\
A checkpoint is named RUN (the run's head) or RUN@ID.
The store is --store PATH, else ${STORE_ENV}, else ./{DEFAULT_STORE}.
An encrypted store's passphrase: $AGENTFS_PASSWORD, else the file named by $AGENTFS_PASSWORD_FILE,
else a prompt; or --key-file PATH.

exit codes:
  0    ok
  1    verify found problems; diff found differences (as diff(1) does); upgrade skipped damaged records
  2    usage error: bad arguments, or an invalid run name, artifact name or checkpoint id
  3    not found: the store, a run, a checkpoint or an artifact
  4    any other error: corrupt or missing data, a malformed record, a conflict, an I/O error
  5    an encrypted store or remote: wrong or missing passphrase or key file
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
    parser.add_argument("--key-file", metavar="PATH", help="unlock an encrypted store with this key file instead of a passphrase")
    parser.add_argument("--version", action="version", version=f"agentfs {agentfs.__version__}")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress bars (they show only on a terminal anyway)")
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
        print(f"agentfs: {args.command} interrupted (Ctrl-C) before it finished", file=sys.stderr)
        return INTERRUPTED
    except (InvalidName, UsageError) as exc:
        return _fail(exc, USAGE)
    except ObjectMissing as exc:  # the checkpoint exists but its data does not: damage, not a bad name
        return _fail(exc, FAILED)
    except NotFound as exc:
        return _fail(exc, NOT_FOUND)
    except WrongKey as exc:
        return _fail(exc, WRONG_KEY)
    except (AgentFSError, OSError) as exc:
        return _fail(exc, FAILED)


def _fail(exc: BaseException, code: int) -> int:
    print(f"agentfs: error: {scrub(str(exc))}", file=sys.stderr)
    return code


if __name__ == "__main__":
    sys.exit(main())
