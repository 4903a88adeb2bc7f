"""engine/lineage.parents: the sweep over a run's entries answers what reading each entry with `readable` answers
(a damaged entry left out, a retired one absent), so Run.heads() and the ui's heads keep their meaning. Divergence
through the sweep: tests/core/test_divergence_retention.py and tests/ui/test_ui_pages.py."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import pytest

import agentfs
from agentfs.core.checkpoint import Checkpoint
from agentfs.engine.lineage import SWEEP_FROM, parents, readable
from agentfs.format import kinds

pytestmark = pytest.mark.timeout(60)
ENTRIES = 4 * SWEEP_FROM + 300  # more than the store's entry cache holds


def one_by_one(store: agentfs.Store, run: str, ids: list[str]) -> dict[str, str | None]:
    entries = {checkpoint_id: readable(store.engine, run, checkpoint_id) for checkpoint_id in ids}
    return {checkpoint_id: entry.manifest.parent for checkpoint_id, entry in entries.items() if entry is not None}


def damage(store: agentfs.Store, run: str, checkpoint_id: str) -> None:
    """Flip a byte in the middle of the entry's record, where it lies in its segment."""
    location = store.engine.index.location(kinds.ENTRY, run, checkpoint_id)
    assert location is not None
    path = Path(store.engine.index.where(location).rsplit(" offset ", 1)[0])
    with open(path, "r+b") as file:
        file.seek(location.offset + location.length // 2)
        byte = file.read(1)
        file.seek(location.offset + location.length // 2)
        file.write(bytes([byte[0] ^ 0xFF]))
        file.flush()
        os.fsync(file.fileno())


def test_the_sweep_answers_what_readable_answers_with_a_damaged_entry_and_after_a_prune(tmp_path: Path) -> None:
    with agentfs.open(tmp_path, durability="process") as store:
        run = store.run("r")
        ids = [run.commit({"step": step}).id for step in range(ENTRIES)]
        assert parents(store.engine, "r", ids) == one_by_one(store, "r", ids) == {ids[0]: None, **dict(zip(ids[1:], ids, strict=False))}
        assert run.heads() == [ids[-1]]
        damaged = ids[20]  # long out of the entry cache
        damage(store, "r", damaged)  # still indexed here (a reopened store's scan would skip its batch)
        assert store.engine.has_entry("r", damaged)
        swept = parents(store.engine, "r", ids)
        assert damaged not in swept and swept == one_by_one(store, "r", ids)
        assert run.heads() == [ids[19], ids[-1]]  # the damaged entry names no parent: its own is a leaf
        run.prune(keep_last=SWEEP_FROM + 5)
        kept = run.ids()
        assert parents(store.engine, "r", kept) == one_by_one(store, "r", kept)


def test_get_many_answers_what_get_answers_and_raises_what_get_raises_for_a_damaged_entry(tmp_path: Path) -> None:
    """Run.get_many (lineage.entries): the sweep's checkpoints are get()'s, and an entry it cannot decode is read by
    read_entry, which raises naming it, as get() does: never a checkpoint left out or another's bytes."""
    with agentfs.open(tmp_path, durability="process") as store:
        run = store.run("r")
        ids = [run.commit({"step": step}, metadata={"n": step}).id for step in range(ENTRIES)]
        swept = run.get_many(ids)
        assert [(cp.id, cp.parent, cp.metadata, cp.state) for cp in swept] == [
            (cp.id, cp.parent, cp.metadata, cp.state) for cp in (run.get(checkpoint_id) for checkpoint_id in ids)
        ]
        damaged = ids[20]  # long out of the entry cache
        damage(store, "r", damaged)
        with pytest.raises(agentfs.IntegrityError) as from_get:
            run.get(damaged)
        with pytest.raises(agentfs.IntegrityError) as from_sweep:
            run.get_many(ids)
        assert str(from_sweep.value) == str(from_get.value)


def test_get_many_checkpoints_read_their_packed_values_from_the_entries_swept_and_verify_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A checkpoint from Run.get_many keeps the entry the sweep decoded: a value packed in that entry is read from it,
    not by reading and decoding the entry again (planted, without the entry kept: read_entry once for each), and
    still checked against its id: bytes that are not the object's are refused."""
    with agentfs.open(tmp_path, durability="process") as store:
        run = store.run("r")
        ids = [run.commit({"note": f"{step} " * 200}).id for step in range(ENTRIES)]  # ~1 KB: packed in the entry
        swept = run.get_many(ids)
        reads: list[str] = []
        read_entry = store.engine.read_entry
        monkeypatch.setattr(
            store.engine, "read_entry", lambda name, checkpoint_id: reads.append(checkpoint_id) or read_entry(name, checkpoint_id)
        )
        assert [checkpoint.state["note"] for checkpoint in swept] == [f"{step} " * 200 for step in range(ENTRIES)]
        assert reads == []
    with agentfs.open(tmp_path, durability="process") as store:  # nothing read yet, nothing in its object cache
        swept = store.run("r").get_many(ids)
        last, before = swept[-1]._entry, swept[-2]._entry
        assert last is not None and before is not None and len(last.pack) == len(before.pack) == 1
        oid = next(iter(last.pack))
        forged = dataclasses.replace(last, pack={oid: next(iter(before.pack.values()))})  # another value's packed bytes
        with pytest.raises(agentfs.IntegrityError, match=oid.hex()):
            Checkpoint(store.engine, last.manifest, entry=forged).state  # noqa: B018
