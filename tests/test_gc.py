"""gc (acceptance 7) as compaction: unreferenced objects past the grace period go; everything else stays.

Orphans are made the way a crashed commit leaves them: objects gathered by the store's own
ObjectWriter/BlobWriter and appended (as a large artifact's flushed batches are) with no entry
pointing at them. The grace period counts from a segment's mtime, set with os.utime on sealed
segments. The last test runs gc(grace=0) over and over while a writer process commits, and checks
that nothing the writer reported is lost.
"""

from __future__ import annotations

import os
import random
import subprocess
import sys
import time
from pathlib import Path

import agentfs
from agentfs.engine.object_store import ObjectWriter
from agentfs.format import chunking
from agentfs.objects.blobs import BlobWriter
from tests.helpers import workload

HELPERS = Path(__file__).parent / "helpers"
HOUR = 3600.0


def _orphans(store: agentfs.Store, blobs: list[bytes], age: float = 0.0) -> set[bytes]:
    """Write `blobs` as a commit would (chunks and tree nodes), never write the entry, and seal them
    into a segment of their own last modified `age` seconds ago. Their oids."""
    before = set(store.db.oids())
    writer = ObjectWriter(store.db, store.pool)
    blob_writer = BlobWriter(writer, {})
    for data in blobs:
        blob_writer.put(data, chunking.LARGE)
    store.db.append(writer.finish(), True)
    _seal_aged(store, age)
    return set(store.db.oids()) - before


def _seal_aged(store: agentfs.Store, age: float) -> None:
    """Seal what this process appended into a segment last modified `age` seconds ago."""
    with store.excluding_writers():
        store.seal_for_compaction()
    newest = store.segments_dir / max(os.listdir(store.segments_dir))
    then = time.time() - age
    os.utime(newest, (then, then))


def _entries(store: agentfs.Store) -> dict[tuple[str, str], bytes | None]:
    return {location: store.local_entry(*location) for location in store.local_entries()}


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
    _seal_aged(store, 2 * HOUR)  # referenced objects are as old: age alone protects nothing
    referenced = set(store.db.oids())
    assert len(referenced) >= 10, "the commits should have written objects"
    entries = _entries(store)

    old = _orphans(store, [rng.randbytes(300_000), rng.randbytes(40_000), *(rng.randbytes(20_000) for _ in range(3))], 2 * HOUR)
    assert len(old) >= 6 and not old & referenced
    middle = _orphans(store, [rng.randbytes(30_000)], HOUR / 2)
    young = _orphans(store, [rng.randbytes(100_000)])
    before = sum(p.stat().st_size for p in store.segments_dir.iterdir())

    report = store.gc(grace=HOUR)
    assert report.deleted == len(old)
    assert set(store.db.oids()) == referenced | middle | young
    assert report.bytes_freed == before - sum(p.stat().st_size for p in store.segments_dir.iterdir())
    assert report.bytes_freed > 300_000
    assert _entries(store) == entries, "gc changed an entry"
    check = store.verify()
    assert check.ok, str(check)
    for checkpoint_id, step in committed.items():
        _check_checkpoint(run.get(checkpoint_id), step)
    latest = fork.latest()
    assert latest is not None and latest.id == fork_cp.id and latest.state == fork_cp.state

    report = store.gc(grace=0)
    assert report.deleted == len(middle | young)
    assert set(store.db.oids()) == referenced
    assert store.verify().ok
    for checkpoint_id, step in committed.items():
        _check_checkpoint(run.get(checkpoint_id), step)


def test_gc_default_grace_is_an_hour(store: agentfs.Store) -> None:
    rng = random.Random(8)
    kept = _orphans(store, [rng.randbytes(50_000)], 50 * 60)
    gone = _orphans(store, [rng.randbytes(50_000)], 70 * 60)
    report = store.gc()
    assert report.deleted == len(gone)
    assert set(store.db.oids()) == kept


def test_gc_keeps_an_old_orphan_that_a_commit_reuses(store: agentfs.Store) -> None:
    data = random.Random(9).randbytes(400_000)
    orphans = _orphans(store, [data], 2 * HOUR)  # a crashed commit of the same bytes left these behind
    assert orphans
    cp = store.run("agent").commit({"step": 0}, artifacts={"data.bin": data})
    assert set(store.db.oids()) == orphans, "the commit should reuse the orphaned objects"
    assert store.gc(grace=HOUR).deleted == 0
    assert store.gc(grace=0).deleted == 0
    assert set(store.db.oids()) == orphans
    assert cp.artifacts["data.bin"].read_bytes() == data
    assert store.verify().ok


def test_gc_drops_what_retirement_hides_and_other_processes_see_the_new_segments(tmp_path: Path) -> None:
    with agentfs.open(tmp_path / "s") as store, agentfs.open(tmp_path / "s") as other:
        run = store.run("agent")
        committed = _commit_steps(run, range(6))
        run.once("tool", lambda: "result")
        assert other.run("agent").ids() == list(committed)
        report = run.prune(keep_last=2)
        store.gc(grace=0)
        kept = [cid for cid in committed if cid not in report.removed]
        assert other.run("agent").ids() == kept  # its index noticed the vanished segments and was rebuilt
        for checkpoint_id in kept:
            _check_checkpoint(other.run("agent").get(checkpoint_id), committed[checkpoint_id])
        assert store.record_ids("agent", "retired") and store.verify().ok


def test_gc_running_while_a_writer_commits_loses_nothing(tmp_path: Path) -> None:
    root = tmp_path / ".agentfs"
    count, tag = 60, "gc"
    with agentfs.open(root) as store:
        store.run("warm").commit({"step": 0})
        # the bytes of the writer's future artifacts, orphaned and old: gc deletes them just as the
        # writer comes to reuse or rewrite them
        future = [workload.make_artifacts(step, tag) for step in range(count)]
        _orphans(store, [data for artifacts in future for data in artifacts.values()], 2 * HOUR)

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
