"""Index snapshots (FORMAT.md "Index snapshots"): an index opens a live writer's unsealed segment through the
snapshot beside it and scans only the batches after it, sees exactly what a full scan sees, ignores a snapshot
that no longer describes its segment, and still refuses every damaged record it lists when it is read."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import agentfs
from agentfs.engine.index import Index
from agentfs.engine.segment_writer import SegmentWriter
from agentfs.engine.segments import snapshot_path
from agentfs.errors import IntegrityError
from agentfs.format import kinds
from agentfs.format import segment as fmt
from agentfs.ids import new_id
from tests.helpers import raw

pytestmark = pytest.mark.timeout(120)

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}

SNAPSHOT_BYTES = 8192
BATCHES = 200


def batch_records(run: str, number: int) -> list[fmt.Record]:
    oid = number.to_bytes(4, "big") + run.encode().ljust(28, b"-")[:28]
    return [fmt.Record(kinds.OBJECT, oid, os.urandom(200)), fmt.Record(kinds.ENTRY, kinds.pair_key(run, new_id()), b"entry %d" % number)]


@pytest.fixture
def live(tmp_path: Path) -> Iterator[SegmentWriter]:
    """A writer that appended BATCHES batches of two runs and still holds its segment, unsealed."""
    with SegmentWriter(tmp_path / "segments", tmp_path / "locks", durability="process", snapshot_bytes=SNAPSHOT_BYTES) as writer:
        for number in range(BATCHES):
            writer.append(batch_records(f"run{number % 2}", number))
        yield writer


def scanned_batches(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the batches any scan decodes from now on (one item each)."""
    counted: list[int] = []
    decode = fmt.decode_batch

    def counting(*args: object, **kwargs: object) -> list[fmt.IndexEntry]:
        counted.append(1)
        return decode(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(fmt, "decode_batch", counting)
    return counted


def seen(index: Index) -> dict[str, object]:
    """Everything an index answers about the store, to compare two indexes of the same segments."""
    runs = index.runs(kinds.ENTRY)
    return {
        "runs": runs,
        "heads": {run: index.head(run) for run in runs},
        "ids": {run: index.ids(kinds.ENTRY, run) for run in runs},
        "entries": {run: index.locations(kinds.ENTRY, run) for run in runs},
        "objects": index.object_locations(),
        "problems": index.problems,
    }


def test_a_fresh_index_scans_only_what_follows_the_snapshot_and_sees_what_a_full_scan_sees(
    live: SegmentWriter, monkeypatch: pytest.MonkeyPatch
) -> None:
    segments = live.directory
    assert snapshot_path(segments / fmt.segment_name(live.segment_id)).exists(), "the writer left no snapshot"
    counted = scanned_batches(monkeypatch)
    full = Index(segments, snapshots=False)
    assert len(counted) == BATCHES
    counted.clear()
    snapshotted = Index(segments)
    # the writer snapshots every max(SNAPSHOT_BYTES, an eighth of the segment): about 30 of 200 batches are after it
    assert len(counted) < BATCHES // 4, f"a fresh index decoded {len(counted)} of {BATCHES} batches"
    assert snapshotted.snapshotted == {live.segment_id}
    assert seen(snapshotted) == seen(full)
    assert snapshotted.sealed_ids() == [], "an unsealed segment is not sealed because its snapshot is a footer"
    record = snapshotted.read(snapshotted.location(kinds.ENTRY, "run0", snapshotted.ids(kinds.ENTRY, "run0")[0]))  # type: ignore[arg-type]
    assert record.body == b"entry 0"


def test_an_index_keeps_up_with_a_snapshotted_segment_until_and_after_its_seal(tmp_path: Path) -> None:
    root = tmp_path / "store"
    store = agentfs.open(root)
    writer = store.engine._segment_writer()
    writer.snapshot_bytes = 2048
    run = store.run("agent")
    for step in range(60):
        run.commit({"step": step, "note": os.urandom(100).hex()})
    snapshotted, full = Index(root / "segments"), Index(root / "segments", snapshots=False)
    assert snapshotted.snapshotted
    for step in range(60, 65):
        run.commit({"step": step})
    writer.seal()  # with the LINEAGE records of the segment's entries
    for index in (snapshotted, full):
        index.refresh()
    assert seen(snapshotted) == seen(full)
    assert Index(root / "segments").lineages("agent"), "the sealed segment has its LINEAGE record"
    # a footer's entry rows vouch for a LINEAGE record; a snapshot's list only the entries before it
    assert snapshotted.lineages("agent") == full.lineages("agent") == []
    store.close()


def test_the_seal_removes_the_snapshot(live: SegmentWriter) -> None:
    path = live.directory / fmt.segment_name(live.segment_id)
    assert snapshot_path(path).exists()
    live.seal()
    assert not snapshot_path(path).exists()
    assert Index(live.directory).snapshotted == set()


def test_no_snapshot_lists_a_batch_before_a_synced_append(tmp_path: Path) -> None:
    """With durability "power", a batch appended unsynced (a large artifact's) is durable only once a synced append
    follows: a snapshot written before that could outlive it after a power cut."""
    with SegmentWriter(tmp_path / "segments", tmp_path / "locks", snapshot_bytes=SNAPSHOT_BYTES) as writer:
        path = tmp_path / "segments" / fmt.segment_name(1)
        for number in range(40):
            writer.append(batch_records("run", number), sync=False)
        assert not snapshot_path(path).exists(), "a snapshot listed batches no fdatasync covered"
        writer.append(batch_records("run", 40))
        assert snapshot_path(path).exists()


def _truncate_snapshot(path: Path, segment: Path) -> None:
    snapshot = snapshot_path(segment)
    snapshot.write_bytes(snapshot.read_bytes()[:-7])


def _flip_in_snapshot(path: Path, segment: Path) -> None:
    snapshot = snapshot_path(segment)
    data = bytearray(snapshot.read_bytes())
    data[fmt.HEADER.size + 40] ^= 0x10  # within its footer frame
    snapshot.write_bytes(bytes(data))


def _another_writers_snapshot(path: Path, segment: Path) -> None:
    with SegmentWriter(path / "other" / "segments", path / "other" / "locks", durability="process", snapshot_bytes=1024) as other:
        for number in range(20):
            other.append(batch_records("stranger", number))
        snapshot_path(segment).write_bytes(snapshot_path(other.directory / fmt.segment_name(other.segment_id)).read_bytes())


def _segment_cut_before_the_snapshots_end(path: Path, segment: Path) -> None:
    os.truncate(segment, segment.stat().st_size // 2)


def _snapshot_end_inside_a_batch(path: Path, segment: Path) -> None:
    copy = fmt.decode_seal_copy(snapshot_path(segment).read_bytes(), "")
    footer = fmt.read_footer(copy.footer_frame, copy.header.segment_id, copy.footer_offset, "")
    header = segment.read_bytes()[: fmt.HEADER.size]
    moved = fmt.encode_seal(copy.header.segment_id, copy.footer_offset - 3, footer.entries())
    snapshot_path(segment).write_bytes(fmt.encode_seal_copy(header, moved))


@pytest.mark.parametrize(
    "damage",
    [_truncate_snapshot, _flip_in_snapshot, _another_writers_snapshot, _segment_cut_before_the_snapshots_end, _snapshot_end_inside_a_batch],
)
def test_a_snapshot_that_no_longer_describes_its_segment_is_ignored(
    live: SegmentWriter, tmp_path: Path, damage: Callable[[Path, Path], None], monkeypatch: pytest.MonkeyPatch
) -> None:
    segment = live.directory / fmt.segment_name(live.segment_id)
    damage(tmp_path, segment)
    counted = scanned_batches(monkeypatch)
    snapshotted = Index(live.directory)
    assert snapshotted.snapshotted == set()
    assert len(counted) >= BATCHES // 2, "the segment was not scanned"
    assert seen(snapshotted) == seen(Index(live.directory, snapshots=False))


def test_a_damaged_chunk_under_a_snapshot_is_refused_by_a_fresh_store(tmp_path: Path) -> None:
    """Issue 21: a fresh store reads a value whose chunks its index found through a snapshot, and still verifies every
    byte: a chunk damaged in place (its frame intact, its bytes not its id's) is refused."""
    root = tmp_path / "store"
    writer_store = agentfs.open(root)
    writer_store.engine._segment_writer().snapshot_bytes = SNAPSHOT_BYTES
    run = writer_store.run("agent")
    checkpoints = [run.commit({"step": step, "blob": os.urandom(40_000)}) for step in range(12)]
    assert list((root / "segments").glob("*" + fmt.SNAPSHOT_SUFFIX)), "the live writer left no snapshot"
    fresh = agentfs.open(root)
    assert fresh.engine.index.snapshotted, "the fresh store did not open the segment through its snapshot"
    assert fresh.run("agent").get(checkpoints[0].id).state["step"] == 0
    fresh.close()
    for oid in raw.object_ids(root):
        if len(raw.object_bytes(root, oid)) > 1_000:  # the blobs' chunks (trees and manifests are smaller)
            raw.corrupt_object(root, oid)
    fresh = agentfs.open(root)
    try:
        assert fresh.engine.index.snapshotted
        with pytest.raises(IntegrityError):
            fresh.run("agent").get(checkpoints[0].id).state  # noqa: B018
    finally:
        fresh.close()
        writer_store.close()


def test_an_encrypted_stores_snapshot_is_read_as_its_seal_would_be(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An encrypted store's segments hold stored run names and groups of records: its snapshot lists them as its seal
    would, and a fresh store opened through it (the key given) sees and reads what a full scan does."""
    key = agentfs.Encryption(passphrase="snapshots", scrypt_n=2**10)
    root = tmp_path / "store"
    writer_store = agentfs.open(root, encryption=key)
    writer_store.engine._segment_writer().snapshot_bytes = 2048
    runs = [writer_store.run(f"agent/{n}") for n in range(3)]
    for step in range(40):
        runs[step % 3].commit({"step": step, "note": os.urandom(300).hex()})
    fresh = agentfs.open(root, encryption=key)
    try:
        assert fresh.engine.index.snapshotted, "the fresh store did not open the segment through its snapshot"
        full = Index(root / "segments", fresh.engine.index.sealer, snapshots=False)
        assert seen(fresh.engine.index) == seen(full)
        assert [c.state["step"] for c in fresh.run("agent/1").history()] == list(range(37, 0, -3))
    finally:
        fresh.close()
        writer_store.close()


KILLED_WRITER = """
import os, sys
import agentfs
store = agentfs.open(sys.argv[1])
store.engine._segment_writer().snapshot_bytes = 4096
run = store.run("agent")
step = 0
while True:
    checkpoint = run.commit({"step": step, "note": os.urandom(400).hex()})
    print(checkpoint.id, step, flush=True)
    step += 1
"""


def test_a_store_opened_after_its_writer_was_killed_reads_every_commit_through_the_snapshot(tmp_path: Path) -> None:
    """SIGKILL mid-commit: the segment stays unsealed with its last snapshot and a tail after it. A store opened
    next reads through the snapshot, finds every commit the writer reported, and commits after the last."""
    root = tmp_path / "store"
    writer = subprocess.Popen([sys.executable, "-c", KILLED_WRITER, str(root)], stdout=subprocess.PIPE, text=True, env=ENV)
    assert writer.stdout is not None
    reported: dict[str, int] = {}
    for line in writer.stdout:
        checkpoint_id, step = line.split()
        reported[checkpoint_id] = int(step)
        if len(reported) == 150:
            break
    os.kill(writer.pid, signal.SIGKILL)
    writer.wait(timeout=30)
    writer.stdout.close()
    store = agentfs.open(root)
    try:
        assert store.engine.index.snapshotted, "the store did not open the killed writer's segment through its snapshot"
        run = store.run("agent")
        for checkpoint_id, step in reported.items():
            assert run.get(checkpoint_id).state["step"] == step
        head = run.latest()
        assert head is not None and head.state["step"] >= 149
        after = run.commit({"step": head.state["step"] + 1})
        latest = run.latest()
        assert latest is not None and latest.id == after.id and after.parent == head.id
    finally:
        store.close()
