"""LINEAGE records (format/lineage.py): the heads a run's sealed segments' records give equal the heads its manifests
give, with a fork, a divergence spanning segments, a retirement, in a store written before the records (its entries'
manifests are read) and in an encrypted store (the records' bodies sealed like every record's)."""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path

import msgpack
import pytest

import agentfs
from agentfs.engine import segment_writer
from agentfs.format import kinds
from agentfs.format import lineage as lineage_format
from agentfs.format import segment as fmt
from agentfs.format.entries import encode_entry
from agentfs.format.lineage import Lineage, Parent, decode_lineage, encode_lineage, summarize
from agentfs.ids import new_id

pytestmark = pytest.mark.timeout(120)
BIG = 1 << 20  # an artifact this big makes the session's segment sealed at close (SEAL_AT), so it gets its records


def manifest_heads(store: agentfs.Store, run: str) -> list[str]:
    """The heads as engine/lineage.py defines them, every manifest of the run read."""
    ids = store.run(run).ids()
    named = {store.run(run).get(checkpoint_id).parent for checkpoint_id in ids}
    leaves = [checkpoint_id for checkpoint_id in ids if checkpoint_id not in named]
    if len(leaves) < 2:
        return leaves
    newest_retired = max(store.run(run).retired(), default="")
    return [leaf for leaf in leaves[:-1] if leaf > newest_retired] + leaves[-1:]


def diverge(store: agentfs.Store, run: str, parent: str) -> str:
    """Append to `run` a checkpoint whose parent is `parent`, not the head: what a pull of another machine's line
    appends (through the engine's append_entry, as a pull does, naming the parent)."""
    template = store.engine.read_entry(run, parent)
    manifest = dataclasses.replace(template.manifest, id=new_id(after=store.run(run).head_id()), parent=parent, created=time.time_ns())
    data, _entry = encode_entry(manifest, template.pack, store.engine.hasher)
    with store.engine.appending(run):
        assert store.engine.append_entry(run, manifest.id, data, parent=Parent(parent))
    return manifest.id


def session(store: agentfs.Store, steps: int) -> list[str]:
    """`steps` checkpoints on run main, the first with an artifact big enough that close() seals the segment."""
    run = store.run("main")
    ids = [run.commit({"step": 0}, artifacts={"big.bin": os.urandom(BIG)}).id]
    ids += [run.commit({"step": step}).id for step in range(1, steps)]
    return ids


def test_heads_from_the_records_equal_the_manifests_with_a_fork_a_divergence_and_a_retirement(tmp_path: Path) -> None:
    with agentfs.open(tmp_path, durability="process") as store:
        ids = session(store, 8)
        theirs = diverge(store, "main", ids[3])  # a second line from the 4th checkpoint, the newest: the head
        store.run("main").fork(ids[1], "side").commit({"side": 1})
        mine = store.run("main").commit({"step": 8}).id  # on `theirs`: the first line ends at ids[-1]
    with agentfs.open(tmp_path, durability="process") as store:
        assert [len(store.engine.index.lineages(run)) for run in ("main", "side")] == [1, 1]  # the records are read
        assert store.run("main").heads() == manifest_heads(store, "main") == [ids[-1], mine]
        assert theirs not in store.run("main").heads()
        assert store.run("side").heads() == manifest_heads(store, "side")
        store.run("main").prune(keep_last=3)  # retires the oldest (and `theirs`' line): the record counts them still
        assert store.run("main").heads() == manifest_heads(store, "main")
    with agentfs.open(tmp_path, durability="process") as store:
        assert store.run("main").heads() == manifest_heads(store, "main")


def test_a_store_written_before_the_records_reads_the_manifests_and_a_line_may_span_old_and_new_segments(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with monkeypatch.context() as old_code:
        old_code.setattr(segment_writer, "lineage_records", lambda segment, entries, parents: [])  # seals with none
        with agentfs.open(tmp_path, durability="process") as store:
            old = session(store, 6)
    with agentfs.open(tmp_path, durability="process") as store:
        assert store.engine.index.lineages("main") == []
        assert store.run("main").heads() == manifest_heads(store, "main") == [old[-1]]
        new = session(store, 4)  # a new segment, sealed with its record: its first entry's parent lies in the old one
        theirs = diverge(store, "main", old[2])  # named from the new segment: the old one's entry is no head
    with agentfs.open(tmp_path, durability="process") as store:
        assert len(store.engine.index.lineages("main")) == 1
        assert store.run("main").heads() == manifest_heads(store, "main") == [new[-1], theirs]


def test_a_record_body_is_checked_before_it_is_used() -> None:
    """A body that does not decode as format/lineage.py says is refused by name (the heads then read the manifests)."""
    lineage = summarize(7, 3, [("01" + "A" * 24, None), ("01" + "B" * 24, "01" + "A" * 24), ("01" + "C" * 24, "01" + "Z" * 24)])
    assert lineage == Lineage(7, 3, ["01" + "B" * 24, "01" + "C" * 24], ["01" + "Z" * 24])
    assert decode_lineage(encode_lineage(lineage), "here") == lineage
    for bad in (b"\x01", encode_lineage(Lineage(7, 1, [], [])), encode_lineage(Lineage(7, 1, ["not a ulid"], []))):
        with pytest.raises(agentfs.FormatError, match="lineage record here"):
            decode_lineage(bad, "here")
    newer = msgpack.packb({"format": 2, "segment": 7, "rows": 1, "leaves": ["01" + "A" * 24], "outside": []})
    with pytest.raises(agentfs.FormatError, match="lineage record here has record format 2, this agentfs reads 1"):
        decode_lineage(newer, "here")


def test_compaction_drops_the_records_and_the_heads_stay_those_of_the_manifests(tmp_path: Path) -> None:
    """A compacted segment holds other entries than the one a record was written into: gc copies no record, and a
    copy made by an agentfs that keeps unknown kinds names another segment, which readers check (format/lineage.py)."""
    with agentfs.open(tmp_path, durability="process") as store:
        ids = session(store, 6)
        diverge(store, "main", ids[2])  # a second line
        store.run("main").commit({"step": 6})
    with agentfs.open(tmp_path, durability="process") as store:
        assert len(store.engine.index.lineages("main")) == 1
        store.run("main").prune(keep_last=4)  # the retired entries make the segment worth compacting
        store.gc(grace=0)
        assert store.engine.index.lineages("main") == []
        assert store.run("main").heads() == manifest_heads(store, "main")


def test_a_record_copied_into_another_segment_is_not_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """agentfs before LINEAGE records keeps records of kinds it does not know when it compacts: a copy lands in a segment
    holding other entries. It names the segment it was written into, so readers read those entries' manifests."""
    with agentfs.open(tmp_path, durability="process") as store:
        first = session(store, 4)
    monkeypatch.setattr(segment_writer, "lineage_records", lambda segment, entries, parents: [])  # the next segment's own record left out
    with agentfs.open(tmp_path, durability="process") as store:
        (written,) = store.engine.index.lineages("main")
        record = store.engine.index.read(written.location, kinds.LINEAGE)
        second = session(store, 4)  # as many entries of the run as the first segment: only the segment id differs
        store.engine._append([fmt.Record(kinds.LINEAGE, kinds.pair_key("main", new_id()), record.body)], True)
    with agentfs.open(tmp_path, durability="process") as store:
        assert len(store.engine.index.lineages("main")) == 2
        assert store.run("main").heads() == manifest_heads(store, "main") == [second[-1]] != [first[-1]]


def test_an_encrypted_store_seals_its_records_and_reads_the_same_heads(tmp_path: Path) -> None:
    with agentfs.open(tmp_path, encryption="correct horse battery staple", durability="process") as store:
        ids = session(store, 5)
        theirs = diverge(store, "main", ids[1])
        mine = store.run("main").commit({"step": 5}).id
    with agentfs.open(tmp_path, encryption="correct horse battery staple", durability="process") as store:
        assert len(store.engine.index.lineages("main")) == 1
        assert store.run("main").heads() == manifest_heads(store, "main") == [ids[-1], mine] and theirs < mine
        location = store.engine.index.lineages("main")[0].location
    raw = b"".join(path.read_bytes() for path in (tmp_path / "segments").glob("*.seg"))
    assert b"leaves" not in raw and b"outside" not in raw  # the body is sealed: no plaintext of it in the segments
    segment = (tmp_path / "segments" / f"{location.segment_id:016x}.seg").read_bytes()
    frame = segment[location.offset : location.offset + location.length]
    assert frame[8] == kinds.LINEAGE and ids[1].encode() not in frame  # stored alone (no group), its ids unreadable


def test_verify_reports_a_record_that_does_not_say_what_the_manifests_say(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """verify compares each LINEAGE record listings use with the manifests of its segment's entries: a store whose
    records are true verifies ok; one whose writer wrote a record leaving a leaf out (a divergence it would hide from
    run.heads()) is reported, naming the segment, the run and both answers. Planted (verify not comparing), it passes."""
    with agentfs.open(tmp_path / "true", durability="process") as store:
        ids = session(store, 6)
        diverge(store, "main", ids[2])
    with agentfs.open(tmp_path / "true") as store:
        assert store.verify().ok
    hiding = lambda segment, rows, parents: (lambda true: true._replace(leaves=true.leaves[-1:]))(summarize(segment, rows, parents))  # noqa: E731
    monkeypatch.setattr(lineage_format, "summarize", hiding)
    with agentfs.open(tmp_path / "lying", durability="process") as store:
        ids = session(store, 6)
        theirs = diverge(store, "main", ids[2])
    monkeypatch.undo()
    with agentfs.open(tmp_path / "lying") as store:
        assert store.run("main").heads() == [theirs]  # the lie at work: the first line's head is not listed
        assert manifest_heads(store, "main") == [ids[-1], theirs]
        report = store.verify()
        (problem,) = report.problems
        assert problem.kind == "malformed" and "LINEAGE record of run 'main'" in problem.where and ".seg" in problem.where
        assert f"the manifests of its segment's 7 entries give [{ids[-1]}, {theirs}]" in problem.detail
