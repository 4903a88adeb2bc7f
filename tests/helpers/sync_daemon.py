"""A sync daemon process for the sync tests: `store.sync(URL, ...)` in a process of its own.

    python sync_daemon.py STORE URL [--storage-options JSON] [--interval S] [--workers N]
                          [--attempts FILE] [--until-synced TIMEOUT] [--batch N]

Opens the store, starts the daemon thread and prints "started" (flushed). Then either runs until
SIGTERM/SIGINT (drains with `daemon.stop()`), or with --until-synced waits for `daemon.flush()`;
either way it prints the daemon's status as one JSON line and exits 0 if everything went up, else 1.

--attempts FILE appends one line per key the process tries to create on the remote, and for a pack
one line `object <hex id>` per object it holds (written and flushed *before* the upload starts), so a
test can see exactly which objects a process (re)uploaded, even when it is SIGKILLed.
--batch N pushes N checkpoints per batch (what the push index confirms at a time), not 1024.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
from typing import Any

import agentfs
from agentfs.format import keys, kinds
from agentfs.format.pack import decode_pack_index
from agentfs.format.segment import TRAILER
from agentfs.sync import remote as remote_module
from agentfs.sync.push import Pusher


def log_attempts(path: str) -> None:
    handle = open(path, "a", buffering=1)  # noqa: SIM115 - lives as long as the process
    lock = threading.Lock()
    original = remote_module.Remote.create

    def create(self: remote_module.Remote, key: str, data: bytes, *, compare: bool = True) -> bool:
        lines = [key]
        if key.endswith(keys.PACK_SUFFIX):
            pack_id = key.rsplit("/", 1)[-1][: -len(keys.PACK_SUFFIX)]
            footer_offset = TRAILER.unpack_from(data, len(data) - TRAILER.size)[1]
            _size, entries = decode_pack_index(data[footer_offset:], pack_id, key)
            lines += [f"object {entry.key.hex()}" for entry in entries if entry.kind == kinds.OBJECT]
        with lock:
            handle.write("".join(line + "\n" for line in lines))
        return original(self, key, data, compare=compare)

    remote_module.Remote.create = create  # type: ignore[method-assign]


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("store")
    parser.add_argument("url")
    parser.add_argument("--storage-options", default="{}")
    parser.add_argument("--interval", type=float, default=30.0)
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--attempts")
    parser.add_argument("--until-synced", type=float)
    parser.add_argument("--batch", type=int)
    args = parser.parse_args()
    if args.batch:
        Pusher.batch_size = args.batch

    if args.attempts:
        log_attempts(args.attempts)
    stopping = threading.Event()
    signal.signal(signal.SIGTERM, lambda _signum, _frame: stopping.set())
    signal.signal(signal.SIGINT, lambda _signum, _frame: stopping.set())
    options: dict[str, Any] = json.loads(args.storage_options)
    store = agentfs.open(args.store)
    daemon = store.sync(args.url, storage_options=options, interval=args.interval, workers=args.workers)
    print(f"started {os.getpid()}", flush=True)
    if args.until_synced is not None:
        drained = daemon.flush(timeout=args.until_synced)
        daemon.stop(timeout=5)
    else:
        while not stopping.wait(0.1):
            pass
        drained = daemon.stop(timeout=30)
    print(json.dumps(daemon.status()), flush=True)
    store.close()
    return 0 if drained else 1


if __name__ == "__main__":
    sys.exit(main())
