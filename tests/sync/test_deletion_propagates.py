"""Deletion propagates, and one damaged entry never blocks the store.

Real stores in real directories, a file remote, the `agentfs` CLI as a subprocess.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import agentfs
from tests.cli.test_cli import cli, json_of
from tests.helpers import raw


def _push(store: Path, url: str) -> None:
    result = cli("sync", url, store=store)
    assert result.returncode == 0, result.stderr


def _retired_on_remote(tmp_path: Path) -> tuple[Path, str, list[str], list[str]]:
    """A store with runs 'kept' (3 checkpoints, 2 pruned) and 'gone' (deleted), all synced: (store, url, pruned ids, gone ids)."""
    url = (tmp_path / "remote").as_uri()
    home = tmp_path / "home"
    with agentfs.open(home) as store:
        kept = store.run("kept")
        ids = [kept.commit({"step": n}).id for n in range(3)]
        gone = [store.run("gone").commit({"step": n}).id for n in range(2)]
    _push(home, url)
    with agentfs.open(home) as store:
        store.run("kept").prune(keep_last=1)
        store.run("gone").delete()
    _push(home, url)
    return home, url, ids[:2], gone


def test_pull_never_brings_back_what_retention_retired(tmp_path: Path) -> None:
    home, url, pruned, gone = _retired_on_remote(tmp_path)
    assert cli("pull", url, store=home).returncode == 0  # the store holding the retirement records
    fresh = tmp_path / "fresh"
    assert cli("pull", url, store=fresh).returncode == 0  # a store that never saw them
    for where in (home, fresh):
        with agentfs.open(where) as store:
            assert store.runs() == ["kept"]
            assert store.run("kept").ids() == [store.run("kept").head_id()]
            assert not set(store.run("kept").ids()) & set(pruned)
            assert store.run("gone").ids() == []
            assert not any(raw.has_record(store, "gone", raw.LOG_RECORDS, cid) for cid in gone)
        assert [run["name"] for run in json_of(cli("runs", "--json", store=where))["runs"]] == ["kept"]


def test_a_fresh_machine_reading_lazily_neither_lists_nor_resumes_a_deleted_run(tmp_path: Path) -> None:
    _home, url, pruned, gone = _retired_on_remote(tmp_path)
    with agentfs.open(tmp_path / "lazy", remote=url) as store:
        assert store.runs() == ["kept"]
        assert store.run("gone").latest() is None
        assert store.run("gone").head_id() is None
        assert not set(store.run("kept").ids()) & set(pruned)
        assert store.run("kept").latest().state == {"step": 2}
        for checkpoint_id in [*gone, *pruned]:  # not resumable by id either
            with pytest.raises(agentfs.NotFound, match="retired"):
                store.run("gone" if checkpoint_id in gone else "kept").get(checkpoint_id)


def _truncate_head(home: Path, run: str) -> str:
    with agentfs.open(home) as store:
        head = store.run(run).head_id()
        assert head is not None
    raw.set_record_bytes(home, run, raw.LOG_RECORDS, head, raw.record_bytes(home, run, raw.LOG_RECORDS, head)[:20])
    return head


def test_a_truncated_head_entry_is_skipped_and_reported_never_blocking(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with agentfs.open(home) as store:
        run = store.run("r")
        first = run.commit({"step": 1}, artifacts={"a.txt": b"x" * 5000}).id
        run.commit({"step": 2})
    damaged = _truncate_head(home, "r")

    runs = cli("runs", "--json", store=home)
    assert runs.returncode == 0 and damaged in runs.stderr  # reported, on stderr
    assert json.loads(runs.stdout)["runs"][0]["head"] == first  # the newest readable checkpoint
    log = cli("log", "r", store=home)
    assert log.returncode == 0 and first in log.stdout and damaged in log.stderr
    gc = cli("gc", "--grace", "0", store=home)
    assert gc.returncode == 0 and damaged in gc.stderr

    with agentfs.open(home) as store:
        run = store.run("r")
        assert run.latest().id == first
        assert [cp.id for cp in run.history()] == [first]
        assert run.damaged()[0][0] == damaged
        after = run.commit({"step": 3})
        assert after.parent == damaged  # appended after the damaged head, which is still the run's head
        assert run.latest().id == after.id
        report = store.gc(grace=0)
        assert report.deleted == 0 and report.damaged and damaged in report.damaged[0]
        assert store.run("r").get(first).artifacts["a.txt"].read_bytes() == b"x" * 5000  # gc kept what it may need

    url = (tmp_path / "remote").as_uri()
    sync = cli("sync", url, store=home)
    assert sync.returncode == 4 and damaged in sync.stderr  # refused by name, the rest pushed
    fresh = tmp_path / "fresh"
    assert cli("pull", url, store=fresh).returncode == 0
    with agentfs.open(fresh) as store:
        assert store.run("r").ids() == [first, after.id]


def test_pull_from_a_remote_holding_a_good_copy_repairs_a_damaged_entry(tmp_path: Path) -> None:
    home = tmp_path / "home"
    url = (tmp_path / "remote").as_uri()
    with agentfs.open(home) as store:
        store.run("r").commit({"step": 1})
        store.run("r").commit({"step": 2})
    _push(home, url)
    damaged = _truncate_head(home, "r")
    result = cli("pull", url, store=home)
    assert result.returncode == 0, result.stderr
    assert "repaired" in result.stdout
    with agentfs.open(home) as store:
        assert store.run("r").damaged() == []
        assert store.run("r").latest().id == damaged
        assert store.run("r").latest().state == {"step": 2}
        assert store.verify().ok
