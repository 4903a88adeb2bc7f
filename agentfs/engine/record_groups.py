"""An encrypted store's batches as segments hold them: small records sealed together in GROUP records.

A commit of a growing conversation appends about four small records; sealed one by one, each paid a
nonce and a tag (28 bytes) and its key's stored run name (some 40 bytes over the plain name), 5% of
the store. Sealed as one group, the commit pays one seal, and the keys inside are plain (FORMAT.md,
"Groups of records"). Records over groups.SMALL_MEMBER are sealed alone, as before.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..format import groups, kinds
from ..format import segment as fmt
from ..format.crypto import Sealer


def seal_batch(sealer: Sealer, records: Sequence[fmt.Record]) -> tuple[list[fmt.Frame], list[fmt.Placed]]:
    """The frames of a batch holding `records` (plain keys and bodies), and where each record lies among them
    (in `records`' order, its key as stored): the small ones in groups, each larger one sealed alone."""
    if _fits_one_group(records):
        return _one_group(sealer, records)  # a commit's usual batch, all of it one group (as plan() would make it)
    sizes = [groups.member_size(r.key, r.body) if len(r.body) <= groups.SMALL_MEMBER else -1 for r in records]
    planned = groups.plan(sizes)
    group_of = {index: number for number, members in enumerate(planned) for index in members}
    frame_of_group: dict[int, int] = {}
    frames: list[fmt.Frame] = []
    placed: list[fmt.Placed] = []
    for index, record in enumerate(records):
        stored = sealer.stored_key(record.kind, record.key)
        number = group_of.get(index)
        if number is None:
            placed.append(fmt.Placed(len(frames), record.kind, stored))
            frames.append(fmt.SealedRecord(record.kind, stored, sealer.seal(record.kind, stored, record.body)))
            continue
        if number not in frame_of_group:
            frame_of_group[number] = len(frames)
            frames.append(fmt.SealedRecord(kinds.GROUP, b"", sealer.seal_group([records[i] for i in planned[number]])))
        placed.append(fmt.Placed(frame_of_group[number], record.kind, stored))
    return frames, placed


def _fits_one_group(records: Sequence[fmt.Record]) -> bool:
    """Whether plan() would put all of `records` in one group: each small, together at most a group's target."""
    if not records or len(records) > groups.MAX_MEMBERS:
        return False
    size = groups.COUNT.size
    for record in records:
        if len(record.body) > groups.SMALL_MEMBER:
            return False
        size += groups.member_size(record.key, record.body)
    return size <= groups.GROUP_TARGET


def _one_group(sealer: Sealer, records: Sequence[fmt.Record]) -> tuple[list[fmt.Frame], list[fmt.Placed]]:
    """seal_batch's frames of records that all go in one group, found without planning groups: the records are
    the group's members as they are (kind, plain key, body)."""
    placed = [fmt.Placed(0, record.kind, sealer.stored_key(record.kind, record.key)) for record in records]
    return [fmt.SealedRecord(kinds.GROUP, b"", sealer.seal_group(records))], placed
