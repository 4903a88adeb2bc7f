"""Encrypted stores on the command line: `agentfs key list|add|remove|passwd` and `agentfs copy --encrypt`.

A key slot wraps the store's master key; adding or removing one never touches the data, and is done
on every remote the store synced with too (a push only puts the slots a remote lacks). A new
passphrase comes from AGENTFS_NEW_PASSWORD, else a prompt (twice); a new key file is written by
`--new-key-file PATH` (32 random bytes, base64, mode 0600).
"""

from __future__ import annotations

import argparse
import datetime as dt
import getpass
import os
import sys
from pathlib import Path
from typing import Any

import agentfs

from ..api import copy_store
from ..errors import AgentFSError, FormatError, WrongKey
from ..format import crypto
from ..sync.index import synced_dirs
from ..sync.pack_remote import PackRemote
from . import output
from .common import FAILED, OK, Subparsers, add_json_flag, cli_encryption, open_existing, storage_options, store_path

NEW_PASSWORD_ENV = "AGENTFS_NEW_PASSWORD"


def register(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser("key", help="an encrypted store's key slots: list, add, remove, passwd")
    actions = parser.add_subparsers(dest="key_command", metavar="ACTION", required=True)

    sub = actions.add_parser("list", help="the store's key slots (id, type, label, created)")
    add_json_flag(sub)
    sub.set_defaults(handler=cmd_list)

    sub = actions.add_parser("add", help="a new slot (here and on every remote this store synced with): a passphrase or a key file")
    which = sub.add_mutually_exclusive_group()
    which.add_argument("--new-key-file", metavar="PATH", help="write a new random key file at PATH (must not exist) and add it")
    which.add_argument("--add-key-file", metavar="PATH", help="add an existing key file (at least 32 bytes)")
    sub.add_argument("--label", default="", help="a note kept with the slot")
    sub.add_argument("--storage-options", metavar="JSON", help="fsspec storage options for the remotes, as JSON")
    sub.set_defaults(handler=cmd_add)

    sub = actions.add_parser("remove", help="remove a slot (never the last one), here and on every remote this store synced with")
    sub.add_argument("slot", metavar="SLOT")
    sub.add_argument("--storage-options", metavar="JSON", help="fsspec storage options for the remotes, as JSON")
    sub.set_defaults(handler=cmd_remove)

    sub = actions.add_parser("passwd", help="a new passphrase slot; those the current passphrase opens go (also on remotes)")
    sub.add_argument("--storage-options", metavar="JSON", help="fsspec storage options for the remotes, as JSON")
    sub.set_defaults(handler=cmd_passwd)

    parser = subparsers.add_parser(
        "copy", help="copy a store into a new one as it is: ids, forks, journals, policy (--encrypt: encrypted, under a new key)"
    )
    parser.add_argument("source", metavar="SRC", help="the store to read")
    parser.add_argument("target", metavar="DEST", help="a new store directory")
    parser.add_argument("--encrypt", action="store_true", help="make DEST encrypted (passphrase: AGENTFS_NEW_PASSWORD or a prompt)")
    parser.set_defaults(handler=cmd_copy)


def _new_passphrase() -> str:
    if os.environ.get(NEW_PASSWORD_ENV):
        return os.environ[NEW_PASSWORD_ENV]
    if not sys.stdin.isatty():
        raise WrongKey(f"no new passphrase: set {NEW_PASSWORD_ENV} or run in a terminal")
    first = getpass.getpass("new passphrase: ")
    if not first or first != getpass.getpass("again: "):
        raise WrongKey("the two passphrases are empty or differ")
    return first


def _new_key_file(path: Path) -> agentfs.Encryption:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        raise WrongKey(f"{path} exists: --new-key-file writes a new file") from None
    with os.fdopen(fd, "wb") as handle:
        handle.write(crypto.new_key_file())
    return agentfs.Encryption(key_file=path)


def _master(store: agentfs.Store) -> bytes:
    master = store.keys.master
    if master is None:
        raise FormatError(f"{store.root} is not encrypted: it has no key slots (copy it with 'agentfs copy --encrypt')")
    return master


def cmd_list(args: argparse.Namespace) -> int:
    with open_existing(args) as store:
        _master(store)
        slots = [slot.describe() for slot in store.keys.slots()]
    if args.json:
        output.emit_json(slots)
    else:
        for slot in slots:
            created = output.when(dt.datetime.fromtimestamp(slot["created"], tz=dt.timezone.utc))
            output.line(f"{slot['slot']}  {slot['type']:<10} {created}  {slot['label']}")
    return OK


def cmd_add(args: argparse.Namespace) -> int:
    with open_existing(args) as store:
        _master(store)  # a plaintext store is refused before a passphrase is asked for
        if args.new_key_file:
            how = _new_key_file(Path(args.new_key_file))
        elif args.add_key_file:
            how = agentfs.Encryption(key_file=args.add_key_file)
        else:
            how = agentfs.Encryption(passphrase=_new_passphrase())
        slot = store.keys.new_slot(how, label=args.label)
        store.keys.add(slot)
        failed = _on_remotes(store, [slot], [], storage_options(args.storage_options))
    output.line(f"added key slot {slot.slot_id} ({slot.type})")
    return FAILED if failed else OK


def _on_remotes(store: agentfs.Store, added: list[crypto.Slot], removed: list[str], options: dict[str, Any]) -> int:
    """Put the `added` slots on every remote this store synced with, then delete the `removed` ones there (a
    push puts the local slots a remote lacks, and never deletes one): a removed passphrase must not unlock a
    remote either. A remote that cannot be reached is named; 1 if any."""
    failed = 0
    for directory in synced_dirs(store.engine):  # store.engine: each remote's sync state (sync/index.py) names its URL
        url = (directory / "url").read_text()
        try:
            remote = PackRemote(url, options)
            for slot in added:
                remote.put_slot(slot)
            for slot_id in removed:
                remote.remove_slot(slot_id)
        except (AgentFSError, OSError) as exc:
            print(f"agentfs: error: key slots not changed on {url}: {exc}", file=sys.stderr)
            failed = 1
    return failed


def cmd_remove(args: argparse.Namespace) -> int:
    with open_existing(args) as store:
        _master(store)
        store.keys.remove(args.slot)
        failed = _on_remotes(store, [], [args.slot], storage_options(args.storage_options))
    output.line(f"removed key slot {args.slot}")
    return FAILED if failed else OK


def cmd_passwd(args: argparse.Namespace) -> int:
    root = store_path(args)
    current = cli_encryption(args, root)
    with open_existing(args) as store:
        master = _master(store)
        found = (current or agentfs.Encryption()).secret()
        assert found is not None
        old = [s for s in store.keys.slots() if s.type == "passphrase" and crypto.open_slot(s, found[1], s.slot_id) == master]
        slot = store.keys.new_slot(agentfs.Encryption(passphrase=_new_passphrase()), label="passwd")
        store.keys.add(slot)  # the new slot is durable before any old one goes
        for gone in old:
            store.keys.remove(gone.slot_id)
        failed = _on_remotes(store, [slot], [gone.slot_id for gone in old], storage_options(args.storage_options))
    output.line(f"passphrase changed: added key slot {slot.slot_id}, removed {len(old)}, here and on the remotes")
    return FAILED if failed else OK


def cmd_copy(args: argparse.Namespace) -> int:
    """Every run copied into DEST as it is (core/store_copy.py): the same checkpoint ids, parents, forks,
    times, metadata, artifacts and journals, and the retention policy; the bytes kept under DEST's keys."""
    source_root, target = Path(args.source).absolute(), Path(args.target).absolute()
    if (target / "config").exists():
        raise FormatError(f"{target} is a store already: copy makes a new one")
    encryption = agentfs.Encryption(passphrase=_new_passphrase()) if args.encrypt else None
    with (
        agentfs.open(source_root, create=False, encryption=cli_encryption(args, source_root)) as source,
        agentfs.open(target, encryption=encryption) as dest,
    ):
        report = copy_store(source, dest)
    for skipped in report.skipped:
        output.line(f"skipped {skipped}")
    records = f"{output.count(report.journal_records, 'journal record')}, {output.count(report.retirements, 'retirement')}"
    copied = f"{output.count(report.checkpoints, 'checkpoint')}, {records}"
    output.line(f"copied {copied} of {output.count(report.runs, 'run')} into {'encrypted ' if args.encrypt else ''}store {target}")
    output.line("the copy is a new store, synced nowhere: `agentfs sync URL` pushes it to a new remote")
    return FAILED if report.skipped else OK
