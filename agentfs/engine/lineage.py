"""A run's shape: its heads (where lines end; two or more is divergence) and its damaged entries."""

from __future__ import annotations

import bisect
import logging
from collections.abc import Iterator, Mapping
from typing import Protocol

from ..errors import AgentFSError, FormatError, IntegrityError, NotFound, ObjectMissing
from ..format import codec, kinds
from ..format.entries import Entry, decode_entry_at
from ..format.lineage import Lineage, decode_lineage, summarize
from .index import Index, SegmentLineage

DAMAGE = (FormatError, IntegrityError)  # what reading a truncated or corrupt entry raises
log = logging.getLogger("agentfs")
SWEEP_FROM = 64  # ids: fewer are each looked up (a few footer rows each), more are swept...
SWEEP_SHARE = 8  # ...when they are at least an eighth of the run's


class EntryReads(Protocol):
    """What these functions read of a store: a Repository (which offers them as methods; this module is below it)."""

    @property
    def index(self) -> Index: ...
    @property
    def source(self) -> object: ...  # None for a store without a remote (a sweep then reads the records in place)
    @property
    def hasher(self) -> codec.Hasher: ...
    def read_entry(self, run: str, checkpoint_id: str) -> Entry: ...
    def has_entry(self, run: str, checkpoint_id: str) -> bool: ...
    def ids(self, run: str) -> list[str]: ...
    def retired_ids(self, run: str) -> set[str]: ...


def readable(store: EntryReads, run: str, checkpoint_id: str) -> Entry | None:
    """The entry; None (logged) if the local copy is damaged, or if it was pruned since it was listed.

    Only a damaged LOCAL entry is skipped: one fetched from a remote that does not verify is refused
    (the error is raised), as every untrusted remote byte is.
    """
    try:
        return store.read_entry(run, checkpoint_id)
    except ObjectMissing:
        raise  # named by the remote, its bytes gone: loud (tests/sync/test_hostile_remote.py, missing is loud)
    except NotFound:
        return None
    except DAMAGE as exc:
        if not store.has_entry(run, checkpoint_id):
            raise
        log.warning("run %r: skipping damaged checkpoint %s: %s", run, checkpoint_id, exc)
        return None


def parents(store: EntryReads, run: str, ids: list[str]) -> dict[str, str | None]:
    """Checkpoint id -> the parent its manifest names, for each of `ids` that `readable` reads (the others are left out).

    A sweep (_swept); an entry the sweep does not decode goes through `readable`, whose rules then apply.
    tests/core/test_divergence_retention.py and tests/engine/test_lineage_parents.py hold both paths to `readable`'s answers."""
    found: dict[str, str | None] = {}
    for checkpoint_id, swept in _swept(store, run, ids):
        entry = swept if swept is not None else readable(store, run, checkpoint_id)
        if entry is not None:
            found[checkpoint_id] = entry.manifest.parent
    return found


def entries(store: EntryReads, run: str, ids: list[str]) -> list[Entry]:
    """The entries of `ids`, in order, as `read_entry` reads each (its errors raised), swept (_swept): an entry the
    sweep does not decode goes through `read_entry` (tests/engine/test_lineage_parents.py)."""
    return [swept if swept is not None else store.read_entry(run, checkpoint_id) for checkpoint_id, swept in _swept(store, run, ids)]


def _swept(store: EntryReads, run: str, ids: list[str]) -> Iterator[tuple[str, Entry | None]]:
    """Each of `ids` with its entry, or None where the caller reads it its own way.

    A sweep: the run's record locations are found once, and each entry is read and decoded from there (about a third
    of what `read_entry` costs for each, which searches every footer); an entry that does not decode there (damaged,
    moved by a compaction), every entry of a store with a remote and every one of too few ids come with None."""
    # finding every location costs the whole run: worth it for a good part of it
    sweep = store.source is None and len(ids) > SWEEP_FROM and len(ids) * SWEEP_SHARE >= store.index.id_slice(kinds.ENTRY, run, 0, 0).total
    located = store.index.locations(kinds.ENTRY, run) if sweep else {}
    for checkpoint_id in ids:
        location = located.get(checkpoint_id)
        decoded = None
        if location is not None:
            try:
                record = store.index.read(location, kinds.ENTRY, kinds.pair_key(run, checkpoint_id))
                if record.kind == kinds.ENTRY and record.key == kinds.pair_key(run, checkpoint_id):
                    decoded = decode_entry_at(record.body, run, checkpoint_id, f"{run}@{checkpoint_id}", store.hasher)
            except AgentFSError:
                pass  # the caller's own read decides: another copy, a repair, a skip (logged), or the error
        yield checkpoint_id, decoded


def heads(store: EntryReads, run: str, ids: list[str]) -> list[str]:
    """Ids among `ids` (the run's, oldest first) where a line of the run ends: two or more is divergence.

    A head is a checkpoint that no readable checkpoint of the run names as parent and that is newer
    than every checkpoint retention removed from the run (the newest is always a head). prune keeps
    the newest checkpoints and, of the older ones, only those a kept checkpoint needs (a fork's
    source, one borrowed from); with the line that went on from it removed, such a checkpoint names
    no child, yet it is no second head (tests/core/test_divergence_retention.py). Retirement records are
    pushed, so every machine draws the same heads. A line of another machine whose newest checkpoint
    is older than the run's last prune is not counted either: the next prune removes it.
    """
    leaves = _leaves(store, run, ids)
    if len(leaves) < 2:
        return leaves
    newest_retired = max(store.retired_ids(run), default="")
    return [leaf for leaf in leaves[:-1] if leaf > newest_retired] + leaves[-1:]


def _leaves(store: EntryReads, run: str, ids: list[str]) -> list[str]:
    """The ids among `ids` (sorted) that no readable checkpoint among them names as parent.

    Each sealed segment's LINEAGE record for the run (format/lineage.py) stands for the manifests of the run's entries
    there: their leaves and the parents they name elsewhere, so a run of 100,000 checkpoints costs a few set operations,
    not 100,000 manifests (benchmarks: workload 17, run page cold). Entries no usable record covers (an unsealed
    segment's, one sealed without a record) are read as before. A record still counts the parent a retired entry
    named: a child's id is greater than its parent's, so that parent is older than a retired id and `heads` leaves it
    out all the same. The records are hints for listing: nothing that keeps data safe reads them.
    tests/engine/test_lineage_records.py holds the answer to the manifests' (a fork, a divergence, a retirement, a
    store written before the records)."""
    try:
        usable = [(segment, lineage) for segment in store.index.lineages(run) if (lineage := _read_lineage(store, run, segment))]
    except AgentFSError:  # a damaged footer row: every entry's manifest is read instead
        usable = []
    candidates = {leaf for _segment, lineage in usable for leaf in lineage.leaves}
    named = {parent for _segment, lineage in usable for parent in lineage.outside}
    inner: list[tuple[set[str], set[str]]] = []  # (ids of a segment, its leaves): the others there are named by a child
    if len(usable) == 1 and usable[0][0].ids == ids:
        rest: list[str] = []  # the common case: one sealed segment holds the whole run
    else:
        inner = [(set(segment.ids), set(lineage.leaves)) for segment, lineage in usable]
        covered = set().union(*(here for here, _leaves in inner))
        rest = [checkpoint_id for checkpoint_id in ids if checkpoint_id not in covered] if covered else ids
    named.update(parent for parent in parents(store, run, rest).values() if parent is not None)
    listed = {leaf for leaf in candidates if _holds(ids, leaf)} | set(rest)  # retired leaves are not the run's
    return sorted(c for c in listed if c not in named and not any(c in here and c not in leaves for here, leaves in inner))


def _holds(ids: list[str], checkpoint_id: str) -> bool:
    """Whether the sorted `ids` hold `checkpoint_id`."""
    at = bisect.bisect_left(ids, checkpoint_id)
    return at < len(ids) and ids[at] == checkpoint_id


def _read_lineage(store: EntryReads, run: str, segment: SegmentLineage) -> Lineage | None:
    """The segment's LINEAGE record for `run` if it reads, was written into this segment and speaks of all the run's
    entries there (as many rows); else None (a record that does not read is logged)."""
    try:
        record = store.index.read(segment.location, kinds.LINEAGE)
        if record.kind != kinds.LINEAGE or kinds.split_pair_key(record.key, "lineage")[0] != run:
            return None
        lineage = decode_lineage(record.body, store.index.where(segment.location))
    except AgentFSError as exc:
        log.warning("run %r: a lineage record is not used: %s", run, exc)
        return None
    return lineage if (lineage.segment, lineage.rows) == (segment.location.segment_id, segment.rows) else None


def untrue(store: EntryReads, run: str, parents_of: Mapping[str, str | None]) -> list[tuple[str, str]]:
    """(where, what) of each LINEAGE record of `run` that listings use (_read_lineage) and that does not say what the
    manifests of its segment's entries say: `verify`'s check of a hint. `parents_of`: the parent each of the run's
    entries that read names; a segment with an entry that did not read (reported as such) is not checked."""
    found = []
    for segment in store.index.lineages(run):
        lineage = _read_lineage(store, run, segment)
        if lineage is None or not all(checkpoint_id in parents_of for checkpoint_id in segment.ids):
            continue
        true = summarize(lineage.segment, lineage.rows, ((checkpoint_id, parents_of[checkpoint_id]) for checkpoint_id in segment.ids))
        if (true.leaves, true.outside) != (lineage.leaves, lineage.outside):
            found.append(
                (
                    f"{store.index.where(segment.location)}: LINEAGE record of run {run!r}",
                    f"it lists leaves {_few(lineage.leaves)} and parents outside {_few(lineage.outside)}, the manifests of "
                    f"its segment's {len(segment.ids)} entries give {_few(true.leaves)} and {_few(true.outside)}: heads "
                    "listed from it (run.heads(), divergence reports, the review page) are wrong",
                )
            )
    return found


def _few(ids: list[str]) -> str:
    return "[" + ", ".join(ids[:4]) + (f", ... {len(ids) - 4} more" if len(ids) > 4 else "") + "]"


def damaged(store: EntryReads, run: str, ids: list[str]) -> list[tuple[str, str]]:
    """(id, why) of each entry among `ids` that cannot be read."""
    problems = []
    for checkpoint_id in ids:
        try:
            store.read_entry(run, checkpoint_id)
        except NotFound:
            continue
        except DAMAGE as exc:
            problems.append((checkpoint_id, str(exc)))
    return problems


def diverged(store: EntryReads, runs: set[str]) -> dict[str, list[str]]:
    """run -> its heads, for each of `runs` with more than one head (two machines appended to one parent)."""
    found = {}
    for run in sorted(runs):
        run_heads = heads(store, run, store.ids(run))
        if len(run_heads) > 1:
            found[run] = run_heads
    return found
