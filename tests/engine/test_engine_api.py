"""The engine API core/ uses (engine/repository.py, "The engine API"): what each method promises.

Durability under power loss is shown by tests/engine/test_crash_states.py, whose workloads reach these
methods through commit, fork, once and prune; here: never replacing, removing what a retirement
names, and config rewrites that keep every writer's change. That core/ holds no path of the store is
import-linter's contract "core uses the engine API, not files" (pyproject.toml, run by make lint).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

import agentfs
from agentfs.format.keys import JOURNAL_RECORDS, LOG_RECORDS
from agentfs.format.retirement import Retirement
from agentfs.ids import new_id


def test_entries_and_records_are_appended_whole_and_never_replaced(store: agentfs.Store) -> None:
    cp = store.run("r").commit({"n": 1})
    stored = store.engine.local_entry("r", cp.id)
    assert stored is not None and store.engine.has_entry("r", cp.id)
    assert store.engine.append_entry("r", cp.id, b"another entry") is False
    assert store.engine.local_entry("r", cp.id) == stored and store.run("r").get(cp.id).state == {"n": 1}
    missing = new_id()
    assert not store.engine.has_entry("r", missing) and store.engine.local_entry("r", missing) is None

    record_id = new_id()
    engine = store.engine
    assert engine.read_record("r", JOURNAL_RECORDS, record_id) is None and engine.record_size("r", JOURNAL_RECORDS, record_id) is None
    assert store.engine.append_record("r", JOURNAL_RECORDS, record_id, b"first") is True
    assert store.engine.append_record("r", JOURNAL_RECORDS, record_id, b"second") is False
    assert engine.read_record("r", JOURNAL_RECORDS, record_id) == b"first" and engine.record_size("r", JOURNAL_RECORDS, record_id) == 5
    assert engine.record_ids("r", JOURNAL_RECORDS) == [record_id] and list(engine.local_records(JOURNAL_RECORDS)) == [("r", record_id)]
    assert record_id in store.engine.where_stored("r", JOURNAL_RECORDS, record_id)


def test_retire_records_what_goes_then_removes_it(store: agentfs.Store) -> None:
    run = store.run("r")
    ids = [run.commit({"n": n}).id for n in range(3)]
    run.once("k", lambda: 1)
    journal = store.engine.record_ids("r", JOURNAL_RECORDS)
    assert len(journal) == 2 and run.get(ids[0]).state == {"n": 0}  # read once: now in the entry cache
    record = Retirement("r", new_id(), time.time_ns(), ids[:2], journal)
    with store.engine.excluding_writers():
        store.engine.retire(record)
    assert store.engine.local_ids("r") == ids[2:] and store.engine.record_ids("r", JOURNAL_RECORDS) == []
    assert [r.checkpoints for r in store.engine.retirements("r")] == [ids[:2]] and store.engine.retired_ids("r") == set(ids[:2])
    with pytest.raises(agentfs.NotFound):
        run.get(ids[0])  # the cache forgot it too
    assert run.journal.get("k") is None and store.verify().ok


def test_rewrite_config_keeps_every_concurrent_writers_change(tmp_path: Path) -> None:
    writers = 8
    stores = [agentfs.open(tmp_path / "s", durability="process") for _ in range(writers)]
    start = threading.Barrier(writers)

    def write(index: int) -> None:
        start.wait()
        for step in range(5):
            stores[index].engine.rewrite_config(lambda config, step=step: config.__setitem__(f"writer-{index}", step))

    threads = [threading.Thread(target=write, args=(i,)) for i in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    config = agentfs.open(tmp_path / "s").engine.read_config()
    assert {key: config[key] for key in config if key.startswith("writer-")} == {f"writer-{i}": 4 for i in range(writers)}
    assert config["store_id"] == stores[0].id


def test_record_ids_skip_the_directories_of_nested_runs(store: agentfs.Store) -> None:
    """runs/a/journal/ holds a's journal records and the directory of the run a/journal/b."""
    a = store.run("a")
    a.once("k", lambda: 1)
    nested = store.run("a/journal/b").commit(2)
    assert len(store.engine.record_ids("a", JOURNAL_RECORDS)) == 2 and a.journal.get("k") is not None and a.journal.damaged == []
    ids = store.engine.record_ids("a", JOURNAL_RECORDS)
    assert store.engine.poll_record_ids("a", JOURNAL_RECORDS, ()) == set(ids) == store.engine.poll_record_ids("a", JOURNAL_RECORDS, ids[:1])
    assert sorted(store.engine.local_runs()) == ["a/journal/b"] and list(store.engine.local_entries()) == [("a/journal/b", nested.id)]
    assert store.engine.where_stored("a/journal/b", LOG_RECORDS, nested.id).endswith(nested.id)
