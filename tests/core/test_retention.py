"""Retention: prune, delete, the store policy, and their guarantees under concurrency."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import timedelta
from pathlib import Path

import pytest

import agentfs
from agentfs.cli.main import main as cli
from agentfs.format.config import remote_config
from agentfs.format.keys import RETIRED_RECORDS
from agentfs.format.retirement import decode_retirement
from agentfs.sync.pack_remote import PackRemote
from agentfs.sync.pull import pull
from agentfs.sync.push import Pusher
from tests.helpers import raw, workload

HELPERS = Path(__file__).parents[1] / "helpers"


def _commit_steps(run: agentfs.Run, steps: range, tag: str = "") -> dict[str, int]:
    ids = {}
    for step in steps:
        cp = run.commit(workload.make_state(step, tag), artifacts=workload.make_artifacts(step, tag), metadata={"step": step})
        ids[cp.id] = step
    return ids


def _check(cp: agentfs.Checkpoint, step: int, tag: str = "") -> None:
    assert cp.state == workload.make_state(step, tag)
    assert {name: a.read_bytes() for name, a in cp.artifacts.items()} == workload.make_artifacts(step, tag)


def test_prune_keeps_the_newest_and_what_they_need_and_gc_frees_the_rest(store: agentfs.Store) -> None:
    run = store.run("agent/a")
    ids = _commit_steps(run, range(30))
    order = sorted(ids)
    fork_point = order[10]
    store.run("agent/a").fork(fork_point, "agent/b")
    _commit_steps(store.run("agent/b"), range(100, 103), tag="b")
    store.gc(grace=0)
    before = raw.stored_size(store.root)

    report = run.prune(keep_last=5)

    # the first entry packs CONFIG, which every later checkpoint borrows; the fork point is b's first parent
    assert report.needed == sorted({order[0], fork_point})
    assert set(report.removed) == set(order[:-5]) - {order[0], fork_point}
    assert raw.record_ids(store, "agent/a") == sorted({*order[-5:], order[0], fork_point})
    (record_id,) = raw.record_ids(store, "agent/a", RETIRED_RECORDS)
    record = decode_retirement(raw.record_bytes(store, "agent/a", RETIRED_RECORDS, record_id), "agent/a", record_id, "test")
    assert sorted(record.checkpoints) == sorted(report.removed) and record.journal == []

    gc = store.gc(grace=0)
    assert gc.deleted > 0
    after = raw.stored_size(store.root)
    assert after < before * 0.6, f"store only went from {before} to {after} bytes"
    for cp_id in order[-5:]:
        _check(run.get(cp_id), ids[cp_id])
    for cp in store.run("agent/b").history():
        assert cp.state == (workload.make_state(10) if cp.forked_from else cp.state)
    assert store.run("agent/b").history()[-1].forked_from == ("agent/a", fork_point)
    report_verify = store.verify()
    assert report_verify.ok, str(report_verify)  # no "parent missing" for pruned parents
    assert run.get(order[-5]).parent == order[-6]  # lineage is still recorded, though the parent is gone
    with pytest.raises(agentfs.NotFound):
        run.get(order[-6])


def test_keep_within_keeps_recent_checkpoints_and_always_the_head(store: agentfs.Store) -> None:
    run = store.run("r")
    old = [run.commit({"i": i}).id for i in range(4)]
    time.sleep(0.3)
    new = [run.commit({"i": i}).id for i in range(4, 7)]
    report = run.prune(keep_within=timedelta(seconds=0.25))
    assert set(report.removed) == set(old) and run.ids() == new
    report = run.prune(keep_within=0)
    assert run.ids() == new[-1:], "the head is always kept"
    assert run.latest().state == {"i": 6}  # type: ignore[union-attr]
    assert store.verify().ok


@pytest.mark.parametrize(("kwargs", "message"), [({}, "needs keep_last"), ({"keep_last": 0}, ">= 1"), ({"keep_within": -1}, "negative")])
def test_bad_prune_arguments_are_refused_before_anything_changes(store: agentfs.Store, kwargs: dict[str, int], message: str) -> None:
    run = store.run("r")
    ids = [run.commit({"i": i}).id for i in range(3)]
    with pytest.raises(ValueError, match=message):
        run.prune(**kwargs)
    assert run.ids() == ids and raw.record_ids(store, "r", RETIRED_RECORDS) == []


def test_delete_removes_the_run_but_what_a_fork_needs(store: agentfs.Store) -> None:
    run = store.run("gone")
    ids = _commit_steps(run, range(6))
    point = sorted(ids)[3]
    run.fork(point, "kept")
    report = run.delete()
    assert report.needed == sorted({sorted(ids)[0], point})
    assert set(run.ids()) == set(report.needed)
    assert store.run("kept").latest().state == workload.make_state(3)  # type: ignore[union-attr]
    store.gc(grace=0)
    assert store.verify().ok
    assert "kept" in store.runs()


def test_a_concurrent_committer_loses_nothing(tmp_path: Path) -> None:
    root = tmp_path / ".agentfs"
    count, tag = 80, "prune"
    with agentfs.open(root) as store:
        store.run("warm").commit({"x": 1})
    writer = subprocess.Popen(
        [sys.executable, str(HELPERS / "writer.py"), str(root), "agent", "--tag", tag, "--count", str(count)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    removed: set[str] = set()
    rounds = 0
    try:
        with agentfs.open(root) as store:
            while writer.poll() is None:
                removed.update(store.run("agent").prune(keep_last=3).removed)
                store.gc(grace=0)
                rounds += 1
        out, err = writer.communicate(timeout=120)
    finally:
        if writer.poll() is None:
            writer.kill()
            writer.wait()
    assert writer.returncode == 0, err
    reported = {line.split()[0]: int(line.split()[1]) for line in out.splitlines()[2:]}
    assert len(reported) == count and rounds >= 5 and removed, f"{rounds} prune rounds removed {len(removed)}"
    with agentfs.open(root) as store:
        run = store.run("agent")
        present = set(run.ids())
        assert set(reported) == present | removed, "a commit vanished without a retirement record"
        assert not present & removed
        for checkpoint_id in present:
            _check(run.get(checkpoint_id), reported[checkpoint_id], tag)
        assert sorted(reported)[-3:] == sorted(present)[-3:]
        report = store.verify()
        assert report.ok, str(report)


def test_store_policy_is_kept_in_config_and_applied_by_gc_except_to_langgraph_threads(tmp_path: Path) -> None:
    root = tmp_path / ".agentfs"
    with agentfs.open(root) as store:
        for name in ("a", "b/c", "langgraph/t/g0/_/cp"):
            for i in range(6):
                store.run(name).commit({"i": i})
        assert cli(["--store", str(root), "retention", "--keep-last", "2", "--keep-within", "0"]) == 0
        assert json.loads((root / "config").read_text())["retention"] == {"keep_last": 2, "keep_within": 0.0}
    assert cli(["--store", str(root), "gc", "--grace", "0"]) == 0
    with agentfs.open(root) as store:
        assert [len(store.run(n).ids()) for n in ("a", "b/c", "langgraph/t/g0/_/cp")] == [2, 2, 6]
        assert store.gc(grace=0).pruned == 0
        store.set_retention()
        assert "retention" not in json.loads((root / "config").read_text())
        assert store.verify().ok


def test_cli_prune_and_delete(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = tmp_path / ".agentfs"
    with agentfs.open(root) as store:
        for i in range(5):
            store.run("x").commit({"i": i})
            store.run("y").commit({"i": i})
    capsys.readouterr()
    assert cli(["--store", str(root), "prune", "x", "--keep-last", "2", "--json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["removed"]) == 3
    assert cli(["--store", str(root), "delete", "y"]) == 0
    assert "removed 5 checkpoints" in capsys.readouterr().out
    assert cli(["--store", str(root), "prune", "x"]) == 2  # neither --keep-last nor --keep-within
    with agentfs.open(root) as store:
        assert store.runs() == ["x"] and len(store.run("x").ids()) == 2


def test_a_damaged_retirement_record_is_reported_by_verify(store: agentfs.Store) -> None:
    run = store.run("r")
    for i in range(4):
        run.commit({"i": i})
    run.prune(keep_last=1)
    (record_id,) = raw.record_ids(store, "r", RETIRED_RECORDS)
    raw.corrupt_record(store, "r", RETIRED_RECORDS, record_id)
    report = store.verify()
    assert [p.kind for p in report.problems].count("corrupt") == 1 and "checksum" in str(report)


def _fork_markers(store: agentfs.Store) -> set[str]:
    """Every run some fork record names as a fork target."""
    return {target for run in ("a", "b", "c") for target in store.engine.forks_of(run)}


def test_forks_are_recorded_before_they_exist_and_arrive_with_a_pull(tmp_path: Path) -> None:
    with agentfs.open(tmp_path / "a") as store:  # a format-2 store records every fork from its start
        ids = sorted(_commit_steps(store.run("a"), range(6)))
        store.run("a").fork(ids[3], "b")
        store.run("b").fork(store.run("b").ids()[0], "c")  # c borrows from a through b
        assert _fork_markers(store) == {"b", "c"}
        assert store.engine.forks_of("a") == {"b", "c"} and store.engine.forks_of("b") == {"c"} and store.engine.forks_of("c") == set()
        Pusher(store.engine, PackRemote((tmp_path / "remote").as_uri(), {"auto_mkdir": True})).push()
        report = store.run("a").prune(keep_last=1)
        assert ids[3] in report.needed
        store.gc(grace=0)
        assert _fork_markers(store) == {"b", "c"}, "compaction keeps fork records"
        assert store.run("c").latest().state == workload.make_state(3)  # type: ignore[union-attr]
        assert store.verify().ok

    with agentfs.open(tmp_path / "b") as other:  # forks arriving from a remote are recorded as they land
        pull(other.engine, PackRemote((tmp_path / "remote").as_uri(), {}))
        assert _fork_markers(other) == {"b", "c"}
        report = other.run("a").prune(keep_last=1)
        assert ids[3] in report.needed


def test_prune_reads_only_the_run_and_its_forks(store: agentfs.Store, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("x", "y", "z"):
        for i in range(5):
            store.run(name).commit({"i": i, "pad": os.urandom(100)})
    read: list[str] = []
    real = store.engine.read_entry
    monkeypatch.setattr(store.engine, "read_entry", lambda run, cid: read.append(run) or real(run, cid))
    store.run("x").prune(keep_last=2)
    assert set(read) == {"x"}, "prune read entries of runs that cannot borrow from it"


def test_a_remote_config_holds_the_format_fields_only_not_the_store_policy(tmp_path: Path) -> None:
    # FORMAT.md "config": the policy is the store's own; a remote's config is created once and never rewritten
    with agentfs.open(tmp_path / "store") as store:
        store.set_retention(keep_last=3)
        store.run("r").commit({"x": 1})
        Pusher(store.engine, PackRemote((tmp_path / "remote").as_uri(), {"auto_mkdir": True})).push()
        published = json.loads((tmp_path / "remote" / "config").read_bytes())
    assert "retention" not in published and "store_id" not in published
    assert published["format"] == remote_config(store.engine.config)["format"] and published["chunking"] == store.engine.config["chunking"]
