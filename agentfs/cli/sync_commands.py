"""sync, pull, clone and status: the remote side of the CLI."""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shutil
import signal
import sys
import threading
from pathlib import Path
from typing import Any

import agentfs

from ..errors import AgentFSError
from ..sync.daemon import RECONCILE_INTERVAL
from ..sync.pack_remote import PackRemote
from ..sync.pull import PullStats, pull
from ..sync.push import Pusher
from ..sync.reconcile import recheck
from ..sync.status import RemoteStats, remote_stats
from . import output
from .common import (
    FAILED,
    INTERRUPTED,
    OK,
    USAGE,
    Subparsers,
    add_json_flag,
    cli_encryption,
    open_existing,
    positive_count,
    positive_seconds,
    remote_url,
    seconds,
    storage_options,
    store_path,
)

INTERRUPT_DRAIN = 1.0  # seconds Ctrl-C gives the daemon to push what is committed: exit within 2 s even if the remote is down


def _add_remote_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("url", type=remote_url, help="fsspec URL: s3://bucket/prefix, gs://..., file:///path, memory://...")
    parser.add_argument(
        "--storage-options",
        metavar="JSON",
        help='fsspec storage options as JSON, e.g. \'{"client_kwargs": {"endpoint_url": "http://minio:9000"}}\'; '
        "credentials come from the usual AWS/GCP chains and are never stored",
    )


def cmd_sync(args: argparse.Namespace) -> int:
    store = open_existing(args)
    options = storage_options(args.storage_options)
    if args.on_commit is not None and not args.watch:
        print("agentfs: error: --on-commit needs --watch", file=sys.stderr)
        return USAGE
    if not args.watch:
        return push_once(store, PackRemote(args.url, options), args.workers, recheck_first=args.recheck, progress=not args.quiet)
    try:
        daemon = store.async_sync(  # a daemon not started yet: it runs below, in the foreground
            args.url,
            options,
            interval=args.interval,
            workers=args.workers,
            on_commit=args.on_commit,
            reconcile_interval=args.reconcile_interval,
        )
    except ValueError as exc:  # an --on-commit command shlex cannot split
        print(f"agentfs: error: {exc}", file=sys.stderr)
        return USAGE
    stopping = threading.Event()
    received: list[int] = []

    def on_signal(signum: int, _frame: object) -> None:
        if received:  # a second signal: stop at once, whatever is in flight
            os._exit(INTERRUPTED)
        received.append(signum)
        stopping.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    daemon.start()
    print(f"agentfs: syncing {store.root} to {daemon.url} (SIGTERM drains and stops; Ctrl-C stops within 2 s)", file=sys.stderr, flush=True)
    while not stopping.wait(1.0):
        pass
    interrupted = received[0] == signal.SIGINT
    drain = min(args.drain_timeout, INTERRUPT_DRAIN) if interrupted else args.drain_timeout
    drained = daemon.stop(timeout=drain)
    status = daemon.status(rescan=False)
    print(
        f"agentfs: stopped; {output.count(status['pushed_entries'], 'checkpoint')} pushed, "
        f"{status['lag_checkpoints']} not yet on the remote" + ("" if drained else f" (drain timed out after {drain:g}s)"),
        file=sys.stderr,
    )
    code = INTERRUPTED if interrupted else OK if drained else FAILED
    if daemon.alive():
        # hazard: the pushing thread is inside a remote call (botocore retries an endpoint that refuses
        # for 10 s and more), and interpreter exit would wait for the push pool's threads: leave now,
        # everything committed is safe in the store and the next sync pushes it
        sys.stderr.flush()
        output.flush()
        os._exit(code)
    return code


def push_once(store: agentfs.Store, remote: PackRemote, workers: int, *, recheck_first: bool = False, progress: bool = True) -> int:
    """`agentfs sync URL`: push, print what was refused as corrupt (exit 4 if anything was), record the outcome for `status`.

    With `recheck_first` (--recheck), list the remote first and push again what it lost."""
    # store.engine: sync's functions take the engine (these commands are sync's own front-end)
    pusher = Pusher(store.engine, remote, workers=workers)
    try:
        if recheck_first:
            reconciliation = recheck(pusher, progress=progress)
            stats = reconciliation.pushed
            lost = (reconciliation.lost_entries, reconciliation.lost_objects, reconciliation.lost_records)
            output.line(f"recheck: the remote lacked {lost[0]} checkpoints, {lost[1]} objects, {lost[2]} records the index claimed")
        else:
            stats = pusher.push(progress=progress)
    except (AgentFSError, OSError) as exc:
        pusher.record_status(pushed=False, error=str(exc))
        raise
    for reason in stats.refused:
        print(f"agentfs: error: {reason}", file=sys.stderr)
    warn_diverged(stats.diverged)
    refused = None
    if stats.refused:
        held = ", ".join(f"{run}@{checkpoint_id}" for run, checkpoint_id in stats.held_back[:10]) or "none"
        refused = f"{output.count(len(stats.refused), 'corrupt record')} refused (not pushed: {held}), e.g. {stats.refused[0]}"
    pusher.record_status(pushed=True, error=refused)
    if stats.lost_entries or stats.lost_objects:
        print(
            f"agentfs: warning: the remote had lost {_amounts(stats.lost_entries, stats.lost_objects)} this store had pushed;"
            " uploaded again",
            file=sys.stderr,
        )
    output.line(f"pushed {_amounts(stats.entries, stats.objects)} ({output.count(stats.bytes, 'byte')}) to {remote.url}")
    return FAILED if stats.refused else OK


def _amounts(checkpoints: int, objects: int) -> str:
    return f"{output.count(checkpoints, 'checkpoint')}, {output.count(objects, 'object')}"


def cmd_pull(args: argparse.Namespace) -> int:
    store = agentfs.open(store_path(args), encryption=cli_encryption(args, store_path(args)))
    remote = PackRemote(args.url, storage_options(args.storage_options))
    # store.engine: sync's functions take the engine (these commands are sync's own front-end)
    stats = pull(store.engine, remote, args.runs or None, progress=not args.quiet)
    output.line(f"pulled {_amounts(stats.entries, stats.objects)} ({output.count(stats.bytes, 'byte')}) from {remote.url}")
    for run, checkpoint_id in stats.repaired:
        output.line(f"repaired damaged checkpoint {run}@{checkpoint_id} from {remote.url}")
    warn_diverged(stats.diverged)
    return report_pulled(stats)


def report_pulled(stats: PullStats) -> int:
    """What a pull or clone retired (on whose policy), refused and skipped; FAILED if it skipped anything."""
    for applied in stats.retired:
        output.line(applied.describe())
    for reason in stats.refused:
        print(f"agentfs: warning: {reason}", file=sys.stderr)
    for reason in stats.skipped:
        print(f"agentfs: error: {reason}", file=sys.stderr)
    if stats.skipped:
        print(f"agentfs: error: {output.count(len(stats.skipped), 'record')} could not be pulled; the rest was", file=sys.stderr)
    return FAILED if stats.skipped else OK


def cmd_clone(args: argparse.Namespace) -> int:
    remote = PackRemote(args.url, storage_options(args.storage_options))
    remote.identify()  # a typo'd URL is refused before anything is made here
    target = Path(args.directory).absolute()
    made = next((path for path in reversed([target, *target.parents]) if not path.exists()), None)
    try:
        # opened once with the remote as source: a new store takes an encrypted remote's key (its passphrase or
        # --key-file); then pulled into without one, so a record the remote cannot serve is skipped and named,
        # not fetched again by a read (tests/sync/test_hostile_remote.py, the rest of a clone proceeds)
        options, key_file = storage_options(args.storage_options), getattr(args, "key_file", None)
        unlock = agentfs.Encryption(key_file=key_file) if key_file else None
        agentfs.open(target, remote=args.url, storage_options=options, encryption=unlock).close()
        with agentfs.open(target, encryption=unlock) as store:
            # store.engine: sync's functions take the engine (these commands are sync's own front-end)
            stats = pull(store.engine, remote, None, progress=not args.quiet)
    except BaseException:  # also Ctrl-C: a failed clone leaves no half-made store behind
        if made is not None:
            shutil.rmtree(made, ignore_errors=True)
        raise
    output.line(f"cloned {remote.url} into {target}: {_amounts(stats.entries, stats.objects)}")
    return report_pulled(stats)


def pushed_at(seconds: float | None) -> str:
    """A remote's last push (seconds since the epoch, from its status), as the CLI prints times."""
    return "never" if seconds is None else output.when(dt.datetime.fromtimestamp(seconds, tz=dt.timezone.utc))


def remote_json(remote: RemoteStats) -> dict[str, Any]:
    """One remote in `status --json` and `stats --json`."""
    return {
        "remote": remote.url,
        "last_push": remote.last_push,
        "last_error": remote.last_error,
        "lag_checkpoints": remote.lag_checkpoints,
        "lag_seconds": round(remote.lag_seconds, 3),
        "queue": remote.lag_checkpoints,
        "pushed_checkpoints": remote.pushed_checkpoints,
        "pulled_from": remote.pulled_from,
        "diverged": remote.diverged,
        "last_reconciliation": remote.last_reconciliation,
        "lost_data": remote.lost_data,
        "refused_retirements": remote.refused_retirements,
    }


def cmd_status(args: argparse.Namespace) -> int:
    store = open_existing(args)
    remotes = remote_stats(store.engine, store.engine.local_entries())  # store.engine: store.stats() would also read every entry
    if args.json:
        output.emit_json({"store": str(store.root), "remotes": [remote_json(remote) for remote in remotes]})
        return OK
    if not remotes:
        output.line(f"{store.root}: no remotes yet (start one with `agentfs sync URL`)")
    for remote in remotes:
        output.line(remote.url)
        output.line(f"  last push:  {pushed_at(remote.last_push)}")
        output.line(f"  lag:        {output.count(remote.lag_checkpoints, 'checkpoint')}, {remote.lag_seconds:.1f} s")
        output.line(f"  queue:      {remote.lag_checkpoints}")
        output.line(f"  last error: {remote.last_error or '-'}")
        if remote.last_reconciliation is not None:
            done = remote.last_reconciliation
            output.line(
                f"  last recheck: {pushed_at(done['finished'])}, re-pushed {_amounts(done['repushed_entries'], done['repushed_objects'])}, "
                f"{output.count(done['repushed_records'], 'record')}" + (", config written again" if done["config_recreated"] else "")
            )
        if remote.lost_data is not None:
            lost = remote.lost_data
            output.line(
                f"  lost data:  the remote had lost {_amounts(lost['entries'], lost['objects'])} this store had pushed "
                f"(found {pushed_at(lost['found'])}; uploaded again)"
            )
        for reason in remote.refused_retirements:
            output.line(f"  refused:    {reason}")
        for run, heads in remote.diverged.items():
            output.line(f"  diverged:   run {run}: {len(heads)} heads {', '.join(heads)} (latest() returns the newest)")
    return OK


def warn_diverged(diverged: dict[str, list[str]]) -> None:
    """One warning line per run with several heads: two machines appended to the same parent."""
    for run, heads in diverged.items():
        print(
            f"agentfs: warning: run {run} has diverged: {len(heads)} heads {', '.join(heads)} "
            f"(latest() returns the newest; see agentfs log {run} --graph)",
            file=sys.stderr,
        )


def register(subparsers: Subparsers) -> None:
    sync = subparsers.add_parser("sync", help="push every checkpoint to a remote (once, or continuously with --watch)")
    _add_remote_arguments(sync)
    sync.add_argument("--watch", action="store_true", help="keep running: push each commit within about a second")
    sync.add_argument("--interval", type=positive_seconds, default=30.0, help="seconds between full rescans with --watch (default 30)")
    sync.add_argument("--workers", type=positive_count, default=16, help="concurrent uploads (default 16)")
    sync.add_argument(
        "--on-commit",
        metavar="CMD",
        help="with --watch: run CMD once per local commit, e.g. 'notify.sh {run} {id}' (split like a shell, no shell; "
        "also AGENTFS_RUN, AGENTFS_CHECKPOINT, AGENTFS_STORE in its environment); commits made while no daemon ran fire at start",
    )
    sync.add_argument("--recheck", action="store_true", help="list the remote first; push again what it lost (the push index is a cache)")
    sync.add_argument(
        "--reconcile-interval",
        type=positive_seconds,
        default=RECONCILE_INTERVAL,
        metavar="SECONDS",
        help=f"with --watch: seconds between rechecks of the remote (default {RECONCILE_INTERVAL:.0f})",
    )
    sync.add_argument("--drain-timeout", type=seconds, default=30.0, help="on SIGTERM, seconds to finish pushing (default 30)")
    sync.set_defaults(handler=cmd_sync)

    pull_parser = subparsers.add_parser("pull", help="fetch checkpoints (all, or of the given runs) and their objects")
    _add_remote_arguments(pull_parser)
    pull_parser.add_argument("runs", nargs="*", metavar="RUN")
    pull_parser.set_defaults(handler=cmd_pull)

    clone = subparsers.add_parser("clone", help="create a store in DIR holding everything on the remote")
    _add_remote_arguments(clone)
    clone.add_argument("directory", metavar="DIR")
    clone.set_defaults(handler=cmd_clone)

    status = subparsers.add_parser("status", help="per remote: last push, lag, queue, last error")
    add_json_flag(status)
    status.set_defaults(handler=cmd_status)
