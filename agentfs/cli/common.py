"""What every command module shares: exit codes, finding the store, naming a checkpoint."""

from __future__ import annotations

import argparse
import getpass
import json
import os
import sys
import urllib.parse
from pathlib import Path
from typing import TYPE_CHECKING, Any

import fsspec

import agentfs

from ..api import PASSWORD_ENV, PASSWORD_FILE_ENV, STORE_ENV, store_root
from ..errors import AgentFSError, NotFound, WrongKey
from ..redaction import redact_url

if TYPE_CHECKING:
    Subparsers = argparse._SubParsersAction[argparse.ArgumentParser]
else:  # not subscriptable at run time
    Subparsers = argparse._SubParsersAction

OK = 0
DIFFERENT = 1  # verify found problems, diff found differences
USAGE = 2  # argparse's own code for a bad command line
NOT_FOUND = 3
FAILED = 4
WRONG_KEY = 5  # an encrypted store or remote that the passphrase or key file given does not open
INTERRUPTED = 130
STDOUT_CLOSED = 141  # what a shell reports for a command killed by SIGPIPE


class UsageError(AgentFSError, ValueError):
    """A bad command line that argparse cannot see (e.g. --storage-options that is not a JSON object): exit 2."""


def store_path(args: argparse.Namespace) -> Path:
    return store_root(args.store or None)


def open_existing(args: argparse.Namespace) -> agentfs.Store:
    """The store named by --store / AGENTFS_STORE; NotFound rather than creating one by accident."""
    root = store_path(args)
    if not (root / "config").is_file():
        raise NotFound(f"no agentfs store at {root} (create one with `agentfs init`, or pass --store PATH or set {STORE_ENV})")
    return agentfs.open(root, create=False, encryption=cli_encryption(args, root))


def cli_encryption(args: argparse.Namespace, root: Path) -> agentfs.Encryption | None:
    """How the CLI unlocks the store at `root`: --key-file, else AGENTFS_PASSWORD(_FILE) (read by agentfs.open),
    else, for an encrypted store and a terminal, a prompt; None for a plaintext store."""
    key_file = getattr(args, "key_file", None)
    if key_file:
        return agentfs.Encryption(key_file=key_file)
    try:
        encrypted = "encryption" in json.loads((root / "config").read_bytes())
    except (OSError, ValueError, TypeError):
        return None  # no store yet, or a config agentfs.open will refuse by name
    if not encrypted or os.environ.get(PASSWORD_ENV) or os.environ.get(PASSWORD_FILE_ENV) or not sys.stdin.isatty():
        return None
    return agentfs.Encryption(passphrase=getpass.getpass(f"passphrase for {root}: "))


def new_store_encryption() -> agentfs.Encryption:
    """For `init --encrypt`: the environment's passphrase (agentfs.open reads it), else one asked for twice."""
    if os.environ.get(PASSWORD_ENV) or os.environ.get(PASSWORD_FILE_ENV) or not sys.stdin.isatty():
        return agentfs.Encryption()
    first = getpass.getpass("new passphrase: ")
    if not first or first != getpass.getpass("again: "):
        raise WrongKey("the two passphrases are empty or differ")
    return agentfs.Encryption(passphrase=first)


def resolve(store: agentfs.Store, target: str) -> agentfs.Checkpoint:
    """`RUN` (its head) or `RUN@ID`; '@' cannot occur in a run name."""
    name, at, checkpoint_id = target.partition("@")
    run = store.run(name)
    if at:
        return run.get(checkpoint_id)
    head = run.latest()
    if head is None:
        raise NotFound(f"run {name!r} not found: it has no checkpoints")
    return head


def add_json_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON document on stdout")


def seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not value >= 0:  # also refuses nan
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds >= 0")
    return value


def positive_seconds(text: str) -> float:
    value = seconds(text)
    if value == 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds > 0")
    return value


def positive_count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a count >= 1")
    return value


def remote_url(text: str) -> str:
    """A remote's URL, checked as a command-line argument: not empty (that would be the working directory), and
    of a protocol fsspec knows; its credentials, if any, are redacted in the message."""
    if not text.strip():
        raise argparse.ArgumentTypeError("the remote URL is empty (e.g. s3://bucket/prefix, gs://bucket/prefix, file:///path)")
    scheme = urllib.parse.urlsplit(text).scheme
    if len(scheme) > 1 and scheme not in fsspec.available_protocols():  # one letter: a Windows drive
        raise argparse.ArgumentTypeError(f"{redact_url(text)!r}: unknown protocol {scheme!r} (e.g. s3://, gs://, file://, memory://)")
    return text


def storage_options(text: str | None) -> dict[str, Any]:
    """--storage-options JSON as a dict."""
    if not text:
        return {}
    try:
        options = json.loads(text)
    except ValueError as exc:
        raise UsageError(f"--storage-options is not valid JSON: {exc}") from None
    if not isinstance(options, dict):
        raise UsageError(f"--storage-options must be a JSON object, got {type(options).__name__}")
    return options
