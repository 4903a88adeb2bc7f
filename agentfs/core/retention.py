"""Retention: prune a run to its newest checkpoints, delete a run, apply the store's policy.

Removing a checkpoint first writes a retirement record (a RETIRED record of the run) naming what
goes; then its log entry is removed (EngineAPI.retire). Records are pushed like entries, so a
remote learns what to drop (remote gc), and verify can tell a pruned parent from a lost one.

"AFR" | version (1 byte, = 1) | sha256(body) (32 bytes) | body
body = msgpack {"format": 1, "run", "id", "created", "writer", "checkpoints": [id...], "journal": [id...]}
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterable
from datetime import timedelta
from typing import Any

from ..errors import AgentFSError
from ..format.keys import JOURNAL_RECORDS
from ..format.refs import EntryAddress
from ..format.retirement import Retirement
from ..ids import id_time_ns, new_id
from .engine_api import EngineAPI

MANAGED_PREFIXES = ("langgraph/", "strands/", "adk/")  # runs whose owner keeps its own retention: the store policy skips them


@dataclasses.dataclass
class PruneReport:
    run: str
    kept: int = 0
    removed: list[str] = dataclasses.field(default_factory=list)
    needed: list[str] = dataclasses.field(default_factory=list)  # past the policy, kept because a kept checkpoint needs them
    journal_removed: int = 0


def _needs(store: EngineAPI, locations: Iterable[EntryAddress], out: set[EntryAddress]) -> None:
    """Add the checkpoints each entry cannot load without: the entries it borrows packed objects from, its fork point."""
    for location in locations:
        try:
            entry = store.read_entry(*location)
        except AgentFSError:
            continue  # unreadable: verify reports it; it needs nothing we could keep for it
        out.update(entry.borrowed())
        if entry.manifest.forked_from is not None:
            out.add((entry.manifest.forked_from[0], entry.manifest.forked_from[1]))


def _seconds(keep_within: timedelta | float | None) -> float | None:
    if keep_within is None:
        return None
    seconds = keep_within.total_seconds() if isinstance(keep_within, timedelta) else float(keep_within)
    if seconds < 0:
        raise ValueError(f"keep_within must not be negative, got {keep_within!r}")
    return seconds


def prune(store: EngineAPI, run: str, keep_last: int | None = None, keep_within: timedelta | float | None = None) -> PruneReport:
    if keep_last is None and keep_within is None:
        raise ValueError("prune needs keep_last, keep_within or both")
    if keep_last is not None and (type(keep_last) is not int or keep_last < 1):
        raise ValueError(f"keep_last must be an int >= 1 (the head is always kept), got {keep_last!r}")
    within = _seconds(keep_within)
    ids = store.local_ids(run)
    cutoff = None if within is None else time.time_ns() - int(within * 1e9)
    keep = set(ids[-keep_last:]) if keep_last else set()
    keep.update(i for i in ids if cutoff is not None and id_time_ns(i) >= cutoff)
    keep.update(ids[-1:])  # the head: a commit in flight may borrow from it
    return _retire(store, {run: [i for i in ids if i not in keep]}, journal=False)[0]


def delete_runs(store: EngineAPI, runs: list[str]) -> list[PruneReport]:
    """Delete several runs at once (their checkpoints, but what other runs need, and their journals)."""
    return _retire(store, {run: store.local_ids(run) for run in runs}, journal=True)


def _family(store: EngineAPI, runs: Iterable[str]) -> set[str]:
    """The runs whose entries may borrow from `runs`: themselves and their forks, transitively."""
    family = set(runs)
    for run in runs:
        family |= store.forks_of(run)
    return family


def _entries_of(store: EngineAPI, runs: set[str]) -> set[EntryAddress]:
    return {(run, checkpoint_id) for run in runs for checkpoint_id in store.local_ids(run)}


def _retire(store: EngineAPI, candidates: dict[str, list[str]], *, journal: bool) -> list[PruneReport]:
    """Remove the candidate checkpoints of each run but those a remaining checkpoint needs.

    Only the runs and their forks can borrow from them (forks/ says which). Their needs are read
    first without blocking commits; then, under the gc lock held exclusively (no commit is between
    choosing what to borrow and appending its entry), the needs of entries committed meanwhile
    are added and only what is still unneeded goes.
    """
    doomed = {(run, cid) for run, ids in candidates.items() for cid in ids}
    seen = _entries_of(store, _family(store, candidates))
    needed: set[EntryAddress] = set()
    _needs(store, seen - doomed, needed)
    reports = []
    with store.excluding_writers():
        now = _entries_of(store, _family(store, candidates))  # forks made meanwhile count too
        _needs(store, now - seen - doomed, needed)
        for run in candidates:
            report = PruneReport(run)
            going = sorted(cid for r, cid in doomed - needed if r == run and (r, cid) in now)
            report.needed = sorted(cid for r, cid in doomed & needed if r == run)
            report.kept = sum(1 for r, _cid in now if r == run) - len(going)
            journal_ids = store.record_ids(run, JOURNAL_RECORDS) if journal else []
            if going or journal_ids:
                store.retire(Retirement(run, new_id(), time.time_ns(), going, journal_ids))
            report.removed = going
            report.journal_removed = len(journal_ids)
            reports.append(report)
    return reports


# the store-wide policy, kept in config under "retention" and applied by gc


def policy(store: EngineAPI) -> dict[str, Any] | None:
    """The retention policy in the store's config now (another process may have changed it)."""
    value = store.read_config().get("retention")
    return value if isinstance(value, dict) else None


def set_policy(store: EngineAPI, keep_last: int | None = None, keep_within: timedelta | float | None = None) -> dict[str, Any] | None:
    """Set (or, with neither argument, clear) the policy gc applies to every run but MANAGED_PREFIXES ones."""
    if keep_last is not None and (type(keep_last) is not int or keep_last < 1):
        raise ValueError(f"keep_last must be an int >= 1, got {keep_last!r}")
    within = _seconds(keep_within)
    value = None if keep_last is None and within is None else {"keep_last": keep_last, "keep_within": within}

    def change(config: dict[str, Any]) -> None:
        if value is None:
            config.pop("retention", None)
        else:
            config["retention"] = value

    store.rewrite_config(change)
    return value


def apply_policy(store: EngineAPI) -> list[PruneReport]:
    rules = policy(store)
    if rules is None:
        return []
    reports = []
    for name in sorted(store.local_runs()):
        if not name.startswith(MANAGED_PREFIXES):
            reports.append(prune(store, name, keep_last=rules.get("keep_last"), keep_within=rules.get("keep_within")))
    return reports
