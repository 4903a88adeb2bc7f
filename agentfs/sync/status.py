"""Each remote's sync state as this store knows it: what it holds of the store's checkpoints, its last push."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from ..engine.repository import Repository
from ..format.refs import EntryAddress
from ..redaction import scrub
from .authority import read_refused
from .index import PushIndex, synced_dirs
from .push import lag_seconds


@dataclasses.dataclass(frozen=True)
class RemoteStats:
    url: str
    pushed_checkpoints: int  # local checkpoints the remote is known to hold
    lag_checkpoints: int  # local checkpoints it is not known to hold
    lag_seconds: float  # age of the oldest of those
    last_push: float | None  # seconds since the epoch, from the daemon's last status
    last_error: str | None
    pulled_from: bool
    diverged: dict[str, list[str]]  # run -> its heads, where the last push or pull found several
    last_reconciliation: dict[str, Any] | None  # the last recheck: when, what the remote had lost, what went up again
    refused_retirements: list[str]  # why each retirement record of the remote this store refused was (sync/authority.py)
    lost_data: dict[str, Any] | None = None  # the last push that found the remote lacking what it had held: when, how much


def remote_stats(store: Repository, local: Iterable[EntryAddress]) -> list[RemoteStats]:
    """Per remote this store has synced with: what it holds of `local` (the store's checkpoints) and its last status."""
    held = set(local)
    rows = []
    for directory in synced_dirs(store):
        index = PushIndex(directory, store.sealer)
        saved = index.read_status()
        pending = list(held - index.entries)
        rows.append(
            RemoteStats(
                url=scrub((directory / "url").read_text()),  # an older agentfs kept a URL's query string
                pushed_checkpoints=len(held & index.entries),
                lag_checkpoints=len(pending),
                lag_seconds=lag_seconds(pending),
                last_push=saved.get("last_push"),
                last_error=None if saved.get("last_error") is None else scrub(str(saved["last_error"])),
                pulled_from=(directory / "pulled").exists(),
                diverged=index.read_divergence(),
                last_reconciliation=index.read_reconciliation(),
                lost_data=index.read_lost(),
                refused_retirements=sorted(read_refused(directory).values()),
            )
        )
    return rows
