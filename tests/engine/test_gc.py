"""gc: unreferenced objects past the grace period go; everything else stays.

Orphans are made the way a crashed commit leaves them: objects gathered by the store's own
ObjectWriter/BlobWriter and appended with no log entry pointing at them. Ages are set through
tests/helpers/raw.py (format 2: the mtime of the segment holding them). The last
test runs gc(grace=0) over and over while a writer process commits, and checks that nothing the
writer reported is lost.
"""

from __future__ import annotations

import random
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import agentfs
from agentfs.engine import sealing
from agentfs.engine.object_store import ObjectWriter
from agentfs.engine.segment_writer import SEAL_AT
from agentfs.format import chunking
from agentfs.objects.blobs import BlobWriter
from tests.helpers import raw, workload

HELPERS = Path(__file__).parents[1] / "helpers"
HOUR = 3600.0


def _orphans(store: agentfs.Store, blobs: list[bytes]) -> set[bytes]:
    """Write `blobs` as a commit would (chunks and tree nodes), and never write the entry."""
    before = raw.object_ids(store)
    writer = ObjectWriter(store.engine.db, store.engine.pool)
    blob_writer = BlobWriter(lambda: writer, {})
    for data in blobs:
        blob_writer.put(data, chunking.LARGE)
    store.engine.db.append(writer.finish(), True)  # as a large artifact's flushed batches: objects, no entry
    return raw.object_ids(store) - before


def _commit_steps(run: agentfs.Run, steps: range, tag: str = "") -> dict[str, int]:
    committed = {}
    for step in steps:
        state, metadata = workload.make_state(step, tag), workload.make_metadata(step, tag)
        cp = run.commit(state, artifacts=workload.make_artifacts(step, tag), metadata=metadata)
        committed[cp.id] = step
    return committed


def _check_checkpoint(cp: agentfs.Checkpoint, step: int, tag: str = "") -> None:
    assert cp.state == workload.make_state(step, tag), f"{cp} lost its state"
    assert {name: a.read_bytes() for name, a in cp.artifacts.items()} == workload.make_artifacts(step, tag)


def test_gc_deletes_old_orphans_keeps_referenced_and_young(store: agentfs.Store) -> None:
    rng = random.Random(7)
    run = store.run("agent")
    committed = _commit_steps(run, range(8))
    fork = run.fork(next(iter(committed)), "agent-fork")  # reaches its objects only through the fork
    fork_cp = fork.commit({"fork": rng.randbytes(40_000)}, artifacts={"f.bin": rng.randbytes(200_000)})
    referenced = raw.object_ids(store)
    assert len(referenced) >= 10, "the commits should have written loose objects"
    entries = raw.stored_records(store)

    old = _orphans(store, [rng.randbytes(300_000), rng.randbytes(40_000), *(rng.randbytes(20_000) for _ in range(3))])
    assert len(old) >= 6 and not old & set(referenced)
    raw.age_objects(store, referenced | old, 2 * HOUR)  # referenced objects are as old: age alone protects nothing
    middle = _orphans(store, [rng.randbytes(30_000)])
    raw.age_objects(store, middle, HOUR / 2)
    young = _orphans(store, [rng.randbytes(100_000)])
    old_bytes = sum(len(raw.object_bytes(store, oid)) for oid in old)

    report = store.gc(grace=HOUR)
    assert report.deleted == len(old)
    assert report.bytes_freed == old_bytes
    assert raw.object_ids(store) == referenced | middle | young
    assert raw.stored_records(store) == entries, "gc touched a log entry"
    check = store.verify()
    assert check.ok, str(check)
    for checkpoint_id, step in committed.items():
        _check_checkpoint(run.get(checkpoint_id), step)
    latest = fork.latest()
    assert latest is not None and latest.id == fork_cp.id and latest.state == fork_cp.state

    assert store.gc(grace=HOUR).deleted == 0  # nothing more is old enough

    report = store.gc(grace=0)
    assert report.deleted == len(middle | young)
    assert raw.object_ids(store) == referenced
    assert store.verify().ok
    for checkpoint_id, step in committed.items():
        _check_checkpoint(run.get(checkpoint_id), step)


def test_gc_default_grace_is_an_hour(store: agentfs.Store) -> None:
    rng = random.Random(8)
    kept = _orphans(store, [rng.randbytes(50_000)])
    gone = _orphans(store, [rng.randbytes(50_000)])
    raw.age_objects(store, kept, 50 * 60)
    raw.age_objects(store, gone, 70 * 60)
    report = store.gc()
    assert report.deleted == len(gone)
    assert all(raw.has_object(store, oid) for oid in kept) and not any(raw.has_object(store, oid) for oid in gone)


def test_gc_keeps_an_old_orphan_that_a_commit_reuses(store: agentfs.Store) -> None:
    data = random.Random(9).randbytes(400_000)
    orphans = _orphans(store, [data])  # a crashed commit of the same bytes left these behind
    assert orphans
    raw.age_objects(store, orphans, 2 * HOUR)
    cp = store.run("agent").commit({"step": 0}, artifacts={"data.bin": data})
    assert raw.object_ids(store) == orphans, "the commit should reuse the orphaned objects"
    assert store.gc(grace=HOUR).deleted == 0
    assert store.gc(grace=0).deleted == 0
    assert all(raw.has_object(store, oid) for oid in orphans)
    assert cp.artifacts["data.bin"].read_bytes() == data
    assert store.verify().ok


def test_gc_running_while_a_writer_commits_loses_nothing(tmp_path: Path) -> None:
    root = tmp_path / ".agentfs"
    count, tag = 60, "gc"
    with agentfs.open(root) as store:
        store.run("warm").commit({"step": 0})
        # the bytes of the writer's future artifacts, orphaned and old: gc deletes them just as the
        # writer comes to reuse or rewrite them
        future = [workload.make_artifacts(step, tag) for step in range(count)]
        raw.age_objects(store, _orphans(store, [data for artifacts in future for data in artifacts.values()]), 2 * HOUR)

    writer = subprocess.Popen(
        [sys.executable, str(HELPERS / "writer.py"), str(root), "agent", "--tag", tag, "--count", str(count)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    rounds = deleted = 0
    try:
        with agentfs.open(root) as store:
            while writer.poll() is None:
                deleted += store.gc(grace=0).deleted
                rounds += 1
        out, err = writer.communicate(timeout=120)
    finally:
        if writer.poll() is None:
            writer.kill()
            writer.wait()
    assert writer.returncode == 0, err
    lines = out.splitlines()
    assert lines[:2] == ["ready", "started"]
    reported = {line.split()[0]: int(line.split()[1]) for line in lines[2:]}
    assert len(reported) == count
    assert rounds >= 5, f"gc ran only {rounds} times while the writer committed"
    assert deleted > 0, "gc never deleted anything while the writer ran: the race was not exercised"

    with agentfs.open(root) as store:
        for _ in range(2):  # as left by the race, then after one more full gc
            run = store.run("agent")
            assert set(run.ids()) == set(reported)
            for checkpoint_id, step in reported.items():
                _check_checkpoint(run.get(checkpoint_id), step, tag)
            report = store.verify()
            assert report.ok, str(report)
            store.gc(grace=0)


def test_gc_drops_what_retirement_hides_and_another_process_follows_the_compaction(tmp_path: Path) -> None:
    with agentfs.open(tmp_path / "s") as store, agentfs.open(tmp_path / "s") as other:
        run = store.run("agent")
        committed = _commit_steps(run, range(6))
        run.once("tool", lambda: "result")
        assert other.run("agent").ids() == list(committed)
        report = run.prune(keep_last=2)
        before = raw.stored_size(store)
        store.gc(grace=0)
        assert raw.stored_size(store) < before, "compaction dropped nothing"
        kept = [checkpoint_id for checkpoint_id in committed if checkpoint_id not in report.removed]
        assert other.run("agent").ids() == kept  # its index saw the segments vanish and was rebuilt
        for checkpoint_id in kept:
            _check_checkpoint(other.run("agent").get(checkpoint_id), committed[checkpoint_id])
        assert raw.record_ids(store, "agent", raw.RETIRED_RECORDS) and store.verify().ok
        assert other.run("agent").once("tool", lambda: "again") == "result"


def test_a_gc_with_no_grace_spares_the_seal_copy_a_closing_writer_is_publishing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A store closing with 1 MiB or more in its segment seals it, and the seal copy goes through tmp/; a gc of
    another store object (another process, in real use) sweeping tmp/ with grace 0 right then deleted the file
    before its rename, and close() failed. Here that gc runs at the moment the copy sits in tmp/: it must leave
    a file whose writer still runs (fsutil.writer_alive)."""
    root = tmp_path / ".agentfs"
    writer = agentfs.open(root)
    writer.run("big").commit({"blob": random.Random(1).randbytes(SEAL_AT + 4096)})
    other = agentfs.open(root)
    other.run("warm").commit({"step": 0})  # its own writer slot, so its gc only waits for the gc lock
    write_temp = sealing.write_temp
    swept: list[threading.Thread] = []

    def write_temp_then_gc(tmp_dir: Path, data: bytes | memoryview, *, sync: bool) -> Path:
        temp = write_temp(tmp_dir, data, sync=sync)
        if not swept:  # the first copy written: sweep tmp/ now, from another thread
            sweep = threading.Thread(target=other.gc, kwargs={"grace": 0})
            swept.append(sweep)
            sweep.start()
            sweep.join(timeout=2.0)
        return temp

    monkeypatch.setattr(sealing, "write_temp", write_temp_then_gc)
    writer.close()  # failed with a StorageError naming the vanished temp file
    swept[0].join(timeout=60)
    other.close()
    with agentfs.open(root) as store:
        assert len(store.run("big").latest().state["blob"]) == SEAL_AT + 4096
        assert store.verify().ok
