"""store.stats(): checkpoints and bytes per run, dedup ratio and journal size (api.py adds each remote's sync state).

Only what is in this store counts (not what a remote lists). Entries, records and objects are sized as stored;
logical bytes are what the checkpoints hold, summed from their manifests' refs without reading a value.
"""

from __future__ import annotations

import dataclasses
import datetime as dt

from ..format.entries import decode_entry_at
from ..format.keys import JOURNAL_RECORDS, LOG_RECORDS
from ..format.refs import ref_size
from .engine_api import EngineAPI


@dataclasses.dataclass
class RunStats:
    run: str
    checkpoints: int = 0
    first: dt.datetime | None = None  # created time of the oldest checkpoint
    last: dt.datetime | None = None
    logical_bytes: int = 0  # the sizes of every checkpoint's state values and artifacts, summed
    entry_bytes: int = 0  # its log entries on disk
    journal_records: int = 0
    journal_bytes: int = 0


@dataclasses.dataclass
class LocalStats:
    runs: list[RunStats]
    objects: int
    object_bytes: int

    @property
    def checkpoints(self) -> int:
        return sum(run.checkpoints for run in self.runs)

    @property
    def entry_bytes(self) -> int:
        return sum(run.entry_bytes for run in self.runs)

    @property
    def logical_bytes(self) -> int:
        return sum(run.logical_bytes for run in self.runs)

    @property
    def journal_records(self) -> int:
        return sum(run.journal_records for run in self.runs)

    @property
    def journal_bytes(self) -> int:
        return sum(run.journal_bytes for run in self.runs)

    @property
    def stored_bytes(self) -> int:
        """What the checkpoints take on disk: objects and log entries (packed objects travel in entries)."""
        return self.object_bytes + self.entry_bytes

    @property
    def dedup_ratio(self) -> float | None:
        """Logical bytes per stored byte; None for a store with nothing stored."""
        return self.logical_bytes / self.stored_bytes if self.stored_bytes else None


def local_stats(store: EngineAPI) -> LocalStats:
    runs: dict[str, RunStats] = {}
    for run, checkpoint_id in store.local_entries():
        data = store.local_entry(run, checkpoint_id)  # not read_entry: the entry cache, or a remote, must not answer
        if data is None:
            continue  # pruned since it was listed
        entry = decode_entry_at(data, run, checkpoint_id, f"{run}@{checkpoint_id} ({store.where_stored(run, LOG_RECORDS, checkpoint_id)})")
        manifest = entry.manifest
        created = dt.datetime.fromtimestamp(manifest.created / 1e9, tz=dt.timezone.utc)
        row = runs.setdefault(run, RunStats(run))
        row.checkpoints += 1
        row.first = created if row.first is None else min(row.first, created)  # clocks of two writers may disagree
        row.last = created if row.last is None else max(row.last, created)
        row.entry_bytes += len(data)
        row.logical_bytes += sum(ref_size(ref) for _label, ref in entry.refs())
    for run, record_id in store.local_records(JOURNAL_RECORDS):
        size = store.record_size(run, JOURNAL_RECORDS, record_id)
        if size is None:
            continue  # removed since it was listed
        row = runs.setdefault(run, RunStats(run))
        row.journal_records += 1
        row.journal_bytes += size
    sizes = list(store.db.sizes())
    return LocalStats(sorted(runs.values(), key=lambda row: row.run), len(sizes), sum(sizes))
