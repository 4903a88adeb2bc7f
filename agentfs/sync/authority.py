"""A remote's authority: which of its retirement records this store applies (docs/FORMAT.md, "A remote's authority is limited").

A retirement record read from a remote removes checkpoints here (and a local gc then deletes their
bytes). Anyone who can write to the bucket can write one, so a remote may retire only what it holds
or held as far as this store knows: checkpoints this store pushed to it or pulled from it (its push
index, kept under remotes/<name>/). A record is refused whole, never applied in part, when it names

- a checkpoint this store holds that this remote never held (committed here and not pushed there,
  or pulled from another remote): tests/sync/test_hostile_remote.py::test_a_forged_retirement_of_unpushed_work_is_refused_whole;
- a head of its run, this store's or the remote's (retention keeps the newest checkpoint), unless it
  retires the run whole (a deleted run): ::test_a_forged_retirement_naming_the_head_is_refused_here_and_on_a_fresh_clone.

A checkpoint this store does not hold is not checked: the record takes nothing from this store, and a
remote gc deletes retired entries, so a remote that held one may list it no more.
What is refused is logged, kept for `agentfs status` (remotes/<name>/refused.json) and reported by pull.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
from pathlib import Path
from typing import Protocol

from ..engine.repository import Repository
from ..errors import RetirementRefused
from ..format.keys import JOURNAL_RECORDS
from ..format.retirement import Retirement
from ..fsutil import write_atomic
from .index import PushIndex

log = logging.getLogger("agentfs.sync")

REFUSED_FILE = "refused.json"
_refused_lock = threading.Lock()  # pull checks retirement records from several threads: one read-modify-write at a time


class Holder(Protocol):
    """A remote as this check sees it (PackRemote is one)."""

    index: PushIndex | None

    @property
    def url(self) -> str: ...

    def list_ids(self, run: str, kind: str = ...) -> list[str]: ...
    def known_head_id(self, run: str) -> str | None: ...


@dataclasses.dataclass(frozen=True)
class Applied:
    """A retirement this store took from a remote: `removed` are the checkpoints it held that are now gone."""

    remote: str
    run: str
    record_id: str
    removed: list[str]
    named: int  # checkpoints the record names (those this store did not hold included)

    def describe(self) -> str:
        return (
            f"retired {len(self.removed)} checkpoint(s) of run {self.run!r} held here ({self.named} named) "
            f"on the retention policy of {self.remote} (retirement record {self.record_id})"
        )


def admit(store: Repository, remote: Holder, record: Retirement) -> None:
    """Raise RetirementRefused unless `remote` may apply `record` to `store`. A refusal is logged and kept:
    the record stays refused, even once the store has pushed what it names."""
    assert remote.index is not None, "attach the remote to the store first"
    name = f"{record.run}/retired/{record.id}"
    earlier = read_refused(remote.index.directory).get(name)
    if earlier is not None:
        raise RetirementRefused(earlier)
    try:
        check_authority(store, remote, record)
    except RetirementRefused as exc:
        note_refused(remote.index.directory, name, str(exc))
        log.warning("%s", exc)
        raise


def check_authority(store: Repository, remote: Holder, record: Retirement) -> None:
    """Raise RetirementRefused unless `remote` (attached to `store`) may apply `record` to `store`."""
    assert remote.index is not None, "attach the remote to the store first"
    run, named = record.run, set(record.checkpoints)
    where = f"remote {remote.url}: retirement record {record.id} of run {run!r}"
    local = store.local_ids(run)
    held = {cid for loc_run, cid in remote.index.entries | remote.index.gone if loc_run == run}
    never_held = sorted((named & set(local)) - held)
    held_journal = {rid for kind, loc_run, rid in remote.index.records if kind == JOURNAL_RECORDS and loc_run == run}
    never_held += sorted((set(record.journal) & set(store.record_ids(run, JOURNAL_RECORDS))) - held_journal)  # journal records too
    if never_held:
        raise RetirementRefused(
            f"{where} names {len(never_held)} checkpoint(s) or journal record(s) this store holds and never pushed to "
            f"or pulled from that remote (e.g. {never_held[0]}); refused whole"
        )
    heads = {head for head in (local[-1] if local else None, remote.known_head_id(run)) if head is not None}
    # a deleted run's record names every checkpoint (heads too); listing the remote's is needed only then
    if named & heads and not (set(local) <= named and set(remote.list_ids(run)) <= named):
        raise RetirementRefused(f"{where} names the head {min(named & heads)} of its run (retention never retires one); refused whole")


def note_refused(directory: Path, name: str, reason: str) -> None:
    """Keep why the remote's retirement record `name` was refused, for `agentfs status`."""
    with _refused_lock:
        data = json.dumps({**read_refused(directory), name: reason}, indent=2).encode()
        write_atomic(directory / "tmp", directory / REFUSED_FILE, data, sync=False, exclusive=False)


def read_refused(directory: Path) -> dict[str, str]:
    try:
        found = json.loads((directory / REFUSED_FILE).read_text())
    except (FileNotFoundError, ValueError):
        return {}
    return {str(key): str(value) for key, value in found.items()} if isinstance(found, dict) else {}
