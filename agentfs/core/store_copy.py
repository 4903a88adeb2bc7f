"""Copy a store into a new one, faithfully: what `agentfs copy` (and `--encrypt`) does.

Every readable checkpoint keeps its run, id, parent, creation time, writer, metadata, schema version and
fork origin; every journal record and retirement record is copied byte for byte (ids, times, results;
what retention removed); the fork relations (what retention keeps for a fork's sake) and the store's
retention policy carry over. What changes is
how the bytes are kept: each value and artifact is read, verified, from the source and written again
under the destination's keys (an encrypted store keys its object ids, so every reference is remade),
deduplicated as a commit would be (an unchanged small value is borrowed from the parent entry).

What is not copied, on purpose: checkpoints and journal records that retention already removed (they are
gone; their retirement records are copied, so `verify` knows why a parent is missing and a later pull
does not bring them back), damaged entries (reported, skipped, as `history()` skips them), and every
remote's sync state (`remotes/`): the copy is a new store, with its own id, attached to no remote until
the user syncs it somewhere.
"""

from __future__ import annotations

import dataclasses
import logging

from ..format.entries import encode_entry
from ..format.keys import JOURNAL_RECORDS, RETIRED_RECORDS
from ..format.lineage import Parent
from ..format.manifest import ValueRef
from ..format.refs import EntryAddress, PackedRef, Ref, located
from ..objects.blobs import BlobReader, BlobWriter, blob_reader
from .checkpoint import Artifact, Checkpoint
from .commit_input import put_artifact
from .engine_api import EngineAPI

log = logging.getLogger("agentfs")


@dataclasses.dataclass
class CopyReport:
    runs: int = 0
    checkpoints: int = 0
    journal_records: int = 0
    retirements: int = 0
    skipped: list[str] = dataclasses.field(default_factory=list)  # "run@id: why" of each damaged entry left out


def copy_store(source: EngineAPI, dest: EngineAPI) -> CopyReport:
    """Copy every run of `source` (its local records) into `dest`, a new empty store; see the module's text."""
    report = CopyReport()
    policy = source.read_config().get("retention")
    if policy is not None:
        dest.rewrite_config(lambda config: config.__setitem__("retention", policy))
    for origin, target in source.fork_relations():  # first: retention must know them before any entry
        dest.note_fork(origin, target)
    reader = blob_reader(source)
    record_runs = {run for kind in (JOURNAL_RECORDS, RETIRED_RECORDS) for run, _record_id in source.local_records(kind)}
    for run in sorted(set(source.local_runs()) | record_runs):
        report.runs += 1
        for checkpoint_id in source.local_ids(run):
            if _copy_entry(source, dest, reader, run, checkpoint_id, report):
                report.checkpoints += 1
        for record_id in source.record_ids(run, JOURNAL_RECORDS):
            data = source.read_record(run, JOURNAL_RECORDS, record_id)
            if data is not None and dest.append_record(run, JOURNAL_RECORDS, record_id, data):
                report.journal_records += 1
        for record_id in source.record_ids(run, RETIRED_RECORDS):
            data = source.read_record(run, RETIRED_RECORDS, record_id)
            if data is not None and dest.append_record(run, RETIRED_RECORDS, record_id, data):
                report.retirements += 1
    return report


def _copy_entry(source: EngineAPI, dest: EngineAPI, reader: BlobReader, run: str, checkpoint_id: str, report: CopyReport) -> bool:
    entry = source.readable(run, checkpoint_id)  # a damaged entry is logged there
    if entry is None:
        report.skipped.append(f"{run}@{checkpoint_id}: damaged (see agentfs verify)")
        return False
    old = entry.manifest
    home: EntryAddress = (run, checkpoint_id)
    with dest.writing():
        borrow_from = (run, old.parent) if old.parent is not None else old.forked_from  # a fork's first entry: its origin
        blobs = BlobWriter(dest.object_writer, _reusable(dest, borrow_from), dest.hasher)
        state: dict[str, ValueRef] = {}
        for key, value in old.state.items():
            blob = blobs.put(reader.read(value.blob, home, f"{run}@{checkpoint_id} state key {key!r}"))
            state[key] = ValueRef(value.format, value.items, blob)
        artifacts: dict[str, Ref] = {}
        checkpoint = Checkpoint(source, old)
        for name, ref in old.artifacts.items():
            with Artifact(checkpoint, name, ref).open() as stream:
                artifacts[name] = put_artifact(blobs, stream)
        objects = blobs.finish()
        manifest = dataclasses.replace(old, state=state, artifacts=artifacts)
        data, new_entry = encode_entry(manifest, blobs.pack, dest.hasher)
        relies_on = set(new_entry.borrowed())
        with dest.appending(run):
            return dest.append_entry(run, checkpoint_id, data, objects=objects, relies_on=relies_on, parent=Parent(manifest.parent))


def _reusable(dest: EngineAPI, home: EntryAddress | list[str] | None) -> dict[bytes, Ref]:
    """The small objects the copied parent (or fork origin) packed: an unchanged small value is borrowed, as a
    commit does; nothing if that entry is not in `dest` (retired, damaged, or its run not copied yet)."""
    if home is None or not dest.has_entry(home[0], home[1]):
        return {}
    where = (home[0], home[1])
    return {ref.oid: located(ref, where) for ref in dest.read_entry(*where).blob_refs() if isinstance(ref, PackedRef)}
