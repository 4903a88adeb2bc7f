"""The lean thread layout: pending writes inside the checkpoints run, a late run for writes to an
older checkpoint, and threads written by the earlier layout (one run per checkpoint's writes) still
read, grow, prune and copy. Every answer is compared with InMemorySaver fed the same calls.

tests/data/langgraph_layout1 is a store the earlier layout wrote (commit 8370de5) with `feed`:
    PYTHONPATH=<tree at 8370de5> python -c "import agentfs, tests.integrations.test_langgraph_lean_layout as t; \
        t.feed(t.AgentFSSaver(agentfs.open('tests/data/langgraph_layout1', durability='process')))"
tests/data/langgraph_layout2 is the lean layout as written up to commit 9fde7e1 (each write batch a mapping of three
state keys; now one value), written the same way with that tree (the store's locks/, tmp/ and remotes/ left out).
"""

from __future__ import annotations

import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph.checkpoint.base")

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import BaseCheckpointSaver, ChannelVersions, Checkpoint, empty_checkpoint
from langgraph.checkpoint.memory import InMemorySaver

import agentfs
from agentfs.format.manifest import MAP_STATE, VALUE_STATE
from agentfs.integrations.langgraph import AgentFSSaver
from agentfs.integrations.langgraph_threads import is_write_batch

OLD_STORE = Path(__file__).parents[1] / "data" / "langgraph_layout1"
MAPPING_BATCHES_STORE = Path(__file__).parents[1] / "data" / "langgraph_layout2"
NAMESPACES = ("", "child:1")


def _config(thread: str, checkpoint_id: str | None = None, ns: str = "") -> RunnableConfig:
    configurable: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ns}
    if checkpoint_id is not None:
        configurable["checkpoint_id"] = checkpoint_id
    return {"configurable": configurable}


def _step(saver: BaseCheckpointSaver[Any], thread: str, ns: str, parent: str | None, checkpoint_id: str, step: int) -> RunnableConfig:
    checkpoint: Checkpoint = {
        **empty_checkpoint(),
        "id": checkpoint_id,
        "channel_values": {"log": [f"{ns} line {i}" for i in range(step + 1)], "step": step},
        "channel_versions": {"log": step + 1, "step": step + 1},
    }
    new: ChannelVersions = {"log": step + 1, "step": step + 1}
    config = saver.put(_config(thread, parent, ns), checkpoint, {"step": step, "run_id": f"run-{step % 2}"}, new)
    saver.put_writes(config, [("log", f"{ns} write {step}"), ("step", step + 1)], f"task-{step}", "~a")
    saver.put_writes(config, [("__error__", f"boom {step}")], f"task-b{step}")
    return config


def feed(saver: BaseCheckpointSaver[Any], thread: str = "old", steps: int = 4) -> None:
    """A thread of two namespaces, each checkpoint with writes, and a write to a checkpoint no longer the latest."""
    for ns in NAMESPACES:
        parent = None
        for step in range(steps):
            parent = _step(saver, thread, ns, parent, f"1f0{step:05d}", step)["configurable"]["checkpoint_id"]
    saver.put_writes(_config(thread, "1f000001"), [("log", "late write")], "task-late")


Row = tuple[Any, ...]


def _seen(saver: BaseCheckpointSaver[Any], thread: str) -> list[list[Row]]:
    """Per namespace, what list shows, newest first, after checking that get_tuple (latest, by id) agrees."""
    seen = []
    for ns in NAMESPACES:
        listed = saver.list(_config(thread, ns=ns))
        rows = [(t.checkpoint["id"], t.checkpoint["channel_values"], t.metadata, t.pending_writes, t.parent_config) for t in listed]
        latest = saver.get_tuple(_config(thread, ns=ns))
        assert (latest and latest.checkpoint["id"]) == (rows[0][0] if rows else None)
        for row in rows:
            by_id = saver.get_tuple(_config(thread, row[0], ns))
            assert by_id is not None and (by_id.checkpoint["channel_values"], by_id.pending_writes) == (row[1], row[3])
        seen.append(rows)
    return seen


def _in_thread(row: Row, thread: str) -> Row:
    return row if row[4] is None else (*row[:4], {"configurable": {**row[4]["configurable"], "thread_id": thread}})


@pytest.fixture
def old_saver(tmp_path: Path) -> AgentFSSaver:
    shutil.copytree(OLD_STORE, tmp_path / "s")
    return AgentFSSaver(agentfs.open(tmp_path / "s", durability="process"))


def test_earlier_layout_reads_grows_prunes_and_copies_as_in_memory_saver(old_saver: AgentFSSaver) -> None:
    assert any("/w/" in run for run in old_saver.store.runs())  # really the earlier layout
    reference = InMemorySaver()
    feed(reference)
    assert _seen(old_saver, "old") == _seen(reference, "old")
    for saver in (old_saver, reference):  # grow it: a new checkpoint, writes to it and to an earlier one
        _step(saver, "old", "", "1f000003", "1f000004", 4)
        saver.put_writes(_config("old", "1f000002"), [("log", "second late write")], "task-late2")
    grown = _seen(reference, "old")
    assert _seen(old_saver, "old") == grown
    # InMemorySaver has no copy_thread, delete_for_runs or prune: expected rows follow from what it showed
    old_saver.copy_thread("old", "copy")
    assert _seen(old_saver, "copy") == [[_in_thread(row, "copy") for row in rows] for rows in grown]
    old_saver.delete_for_runs(["run-1"])  # found through the earlier layout's index ("old") and the lean one ("copy")
    kept = [[row for row in rows if row[2]["run_id"] != "run-1"] for rows in grown]
    assert _seen(old_saver, "old") == kept
    assert _seen(old_saver, "copy") == [[_in_thread(row, "copy") for row in rows] for rows in kept]
    old_saver.prune(["old"], strategy="keep_latest")
    assert _seen(old_saver, "old") == [rows[:1] for rows in kept]
    assert old_saver.store.verify().ok


def _batch_kinds(store: agentfs.Store) -> dict[str, set[str]]:
    """The state kinds of the write batches in each of the store's runs that hold any."""
    kinds: dict[str, set[str]] = {}
    for run in store.runs():
        for commit in store.run(run).history():
            if is_write_batch(commit) or run.endswith("/late"):
                kinds.setdefault(run, set()).add(commit.state_kind)
    return kinds


def test_write_batches_stored_as_three_keys_read_grow_and_copy_as_in_memory_saver(tmp_path: Path) -> None:
    """A thread whose write batches (in its checkpoints runs and its late run) are mappings of three state keys, as
    savers before the one-value batch wrote them: read as InMemorySaver shows them, grown with one-value batches, then
    copied (the copy holds both kinds as they were) and pruned."""
    shutil.copytree(MAPPING_BATCHES_STORE, tmp_path / "s")
    old_saver = AgentFSSaver(agentfs.open(tmp_path / "s", durability="process"))
    before = _batch_kinds(old_saver.store)
    assert before and all(kinds == {MAP_STATE} for kinds in before.values()), before  # really the three-key batches
    assert any(run.endswith("/late") for run in before)
    reference = InMemorySaver()
    feed(reference)
    assert _seen(old_saver, "old") == _seen(reference, "old")
    for saver in (old_saver, reference):  # grow it: a new checkpoint, writes to it and to an earlier one (late)
        _step(saver, "old", "", "1f000003", "1f000004", 4)
        saver.put_writes(_config("old", "1f000002"), [("log", "second late write")], "task-late2")
    assert {kind for kinds in _batch_kinds(old_saver.store).values() for kind in kinds} == {MAP_STATE, VALUE_STATE}
    grown = _seen(reference, "old")
    assert _seen(old_saver, "old") == grown
    old_saver.copy_thread("old", "copy")
    assert _seen(old_saver, "copy") == [[_in_thread(row, "copy") for row in rows] for rows in grown]
    old_saver.prune(["old"], strategy="keep_latest")
    assert _seen(old_saver, "old") == [rows[:1] for rows in grown]
    fresh = AgentFSSaver(old_saver.store)  # nothing this saver committed is remembered: every batch read back
    assert _seen(fresh, "copy") == [[_in_thread(row, "copy") for row in rows] for rows in grown]
    assert old_saver.store.verify().ok


def test_a_long_thread_is_a_handful_of_runs(tmp_path: Path) -> None:
    with AgentFSSaver(tmp_path / "s", durability="process") as saver:
        reference = InMemorySaver()
        for target in (saver, reference):
            feed(target, "long", steps=60)
        runs = [run for run in saver.store.runs() if "/byrun/" not in run]
        assert len(runs) == 3, runs  # per namespace: checkpoints, late writes... and nothing per checkpoint
        assert sorted(run.rsplit("/", 1)[1] for run in runs) == ["cp", "cp", "late"]
        assert _seen(saver, "long") == _seen(reference, "long")
        for step in range(60, 160):  # a LangGraph run_id per turn, as LangGraph's server gives
            config = _config("long", f"1f0{step - 1:05d}")
            checkpoint: Checkpoint = {**empty_checkpoint(), "id": f"1f0{step:05d}", "channel_values": {}, "channel_versions": {}}
            saver.put(config, checkpoint, {"step": step, "run_id": f"turn-{step}"}, {})
        assert len(saver.store.runs()) - len(runs) <= 16  # the run_id index: at most 16 buckets
        saver.delete_for_runs(["turn-100", "turn-101"])
        kept = [t.metadata["run_id"] for t in saver.list(_config("long"))]  # the root namespace
        assert "turn-100" not in kept and "turn-101" not in kept and "turn-102" in kept and len(kept) == 60 + 100 - 2


def test_writes_racing_the_next_checkpoint_land_in_the_late_run(tmp_path: Path) -> None:
    with AgentFSSaver(tmp_path / "s", durability="process") as saver:
        reference = InMemorySaver()
        for target in (saver, reference):
            first = _step(target, "t", "", None, "1f000000", 0)
            _step(target, "t", "", "1f000000", "1f000001", 1)
            target.put_writes(first, [("log", "after the next checkpoint")], "slow-task")
            target.put_writes(_config("t", "1f000009"), [("log", "for a checkpoint not saved yet")], "early-task")
            # LangGraph's background put of a checkpoint can finish after a task's first write to it: a special
            # write made later (inline) must still replace the earlier one (late)
            target.put_writes(_config("t", "1f000009"), [("__interrupt__", "first question")], "asking-task")
            _step(target, "t", "", "1f000001", "1f000009", 9)
            target.put_writes(_config("t", "1f000009"), [("__interrupt__", "second question")], "asking-task")
        assert _seen(saver, "t") == _seen(reference, "t")
        latest = saver.get_tuple(_config("t"))
        assert latest is not None and ("asking-task", "__interrupt__", "second question") in latest.pending_writes


def test_concurrent_writes_to_one_checkpoint_all_land(tmp_path: Path) -> None:
    with AgentFSSaver(tmp_path / "s", durability="process") as saver:
        config = _step(saver, "t", "", None, "1f000000", 0)
        tasks = [f"parallel-{i}" for i in range(48)]
        with ThreadPoolExecutor(16) as pool:
            list(pool.map(lambda task: saver.put_writes(config, [("log", task)], task), tasks))
        latest = saver.get_tuple(_config("t"))
        assert latest is not None and {task for task, _channel, _value in latest.pending_writes} >= set(tasks)


def test_list_with_a_limit_reads_only_the_newest_checkpoints_and_their_writes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = agentfs.open(tmp_path / "s", durability="process")
    config = _config("t")
    for step in range(40):  # no list channel: a list's delta would be read from the commit its version extends
        checkpoint: Checkpoint = {**empty_checkpoint(), "id": f"1f0{step:05d}", "channel_values": {"step": step}}
        checkpoint["channel_versions"] = {"step": step + 1}
        config = AgentFSSaver(store).put(config, checkpoint, {"step": step}, {"step": step + 1})
        AgentFSSaver(store).put_writes(config, [("step", step + 1)], f"task-{step}")
    saver = AgentFSSaver(store)  # nothing remembered: every commit it uses is read
    (run,) = [name for name in store.runs() if name.endswith("/cp")]
    newest = store.run(run).ids()[-2 * 10 :]  # the 10 newest checkpoints, each followed by its write commit
    read: list[str] = []
    real = agentfs.Run.get
    monkeypatch.setattr(agentfs.Run, "get", lambda self, commit_id: read.append(commit_id) or real(self, commit_id))
    listed = list(saver.list(_config("t"), limit=10))
    assert [tup.checkpoint["id"] for tup in listed] == [f"1f0{step:05d}" for step in range(39, 29, -1)]
    assert [tup.pending_writes for tup in listed] == [[(f"task-{step}", "step", step + 1)] for step in range(39, 29, -1)]
    assert read and set(read) <= set(newest)


def test_a_saver_decodes_each_late_write_batch_once_and_sees_new_ones(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """LangGraph asks for a checkpoint's writes at every get_tuple, and the namespace's late batches grow with the
    thread: a saver decodes each once (LateBatches), and still sees a batch added since, as InMemorySaver does.

    Planted (LateBatches.read reading every id each time): the second look decodes all three batches again."""
    swept: list[int] = []
    real = agentfs.Run.get_many
    monkeypatch.setattr(agentfs.Run, "get_many", lambda self, ids: swept.append(len(ids)) or real(self, ids))
    with AgentFSSaver(tmp_path / "s", durability="process") as writer:
        saver = AgentFSSaver(writer.store)  # the writer keeps the batches it commits: this one reads them
        reference = InMemorySaver()
        for target in (writer, reference):
            first = _step(target, "t", "", None, "1f000000", 0)
            _step(target, "t", "", "1f000000", "1f000001", 1)
            for task in ("a", "b"):
                target.put_writes(first, [("log", f"late {task}")], task)  # to a checkpoint no longer the head: late
        swept.clear()
        assert saver.get_tuple(_config("t", "1f000000")).pending_writes == reference.get_tuple(_config("t", "1f000000")).pending_writes  # type: ignore[union-attr]
        assert sum(swept) == 2  # both late batches, read once
        for target in (writer, reference):
            target.put_writes(first, [("log", "late c")], "c")
        swept.clear()
        assert saver.get_tuple(_config("t", "1f000000")).pending_writes == reference.get_tuple(_config("t", "1f000000")).pending_writes  # type: ignore[union-attr]
        assert sum(swept) == 1  # the new one only
        assert _seen(saver, "t") == _seen(reference, "t")


def test_writes_after_another_process_switched_the_thread_land_in_the_new_generation(tmp_path: Path) -> None:
    """A saver appends a step's write batches from its last look at the store (it made the head); when another
    process prunes the thread meanwhile (a new generation holding the latest checkpoint), the next batch must go to
    the new generation, found by the commit's own look, not to the retired one."""
    writer = AgentFSSaver(agentfs.open(tmp_path / "s", durability="process"))
    other = AgentFSSaver(agentfs.open(tmp_path / "s", durability="process"))  # its own index: another process's view
    reference = InMemorySaver()
    for saver in (writer, reference):
        _step(saver, "t", "", None, "1f000000", 0)
        latest = _step(saver, "t", "", "1f000000", "1f000001", 1)
    other.prune(["t"], strategy="keep_latest")
    writer.put_writes(latest, [("log", "after the switch")], "task-after")
    reference.put_writes(latest, [("log", "after the switch")], "task-after")
    fresh = AgentFSSaver(agentfs.open(tmp_path / "s", durability="process"))
    got = fresh.get_tuple(_config("t"))
    wanted = reference.get_tuple(_config("t"))
    assert got is not None and wanted is not None
    assert got.pending_writes == wanted.pending_writes and ("task-after", "log", "after the switch") in got.pending_writes


def test_late_writes_after_another_process_switched_the_thread_land_in_the_new_generation(tmp_path: Path) -> None:
    """Writes to a checkpoint older than the head this saver made go to the late run from its last look at the store;
    when another process rebuilt the thread meanwhile (an out-of-order put: a new generation holding every
    checkpoint), they must land in the new generation's late run, not in the retired one."""
    writer = AgentFSSaver(agentfs.open(tmp_path / "s", durability="process"))
    other = AgentFSSaver(agentfs.open(tmp_path / "s", durability="process"))  # its own index: another process's view
    reference = InMemorySaver()
    for saver in (writer, reference):
        first = _step(saver, "t", "", None, "1f000000", 0)
        _step(saver, "t", "", "1f000000", "1f000002", 1)
    for saver in (other, reference):
        _step(saver, "t", "", "1f000000", "1f000001", 2)  # below the head: `other` rebuilds the thread
    for saver in (writer, reference):
        saver.put_writes(first, [("log", "late, after the switch")], "task-late")
    fresh = AgentFSSaver(agentfs.open(tmp_path / "s", durability="process"))
    got = fresh.get_tuple(first)
    wanted = reference.get_tuple(first)
    assert got is not None and wanted is not None
    assert got.pending_writes == wanted.pending_writes and ("task-late", "log", "late, after the switch") in got.pending_writes


def test_a_put_after_another_process_switched_the_thread_lands_in_the_new_generation(tmp_path: Path) -> None:
    """A put after the head this saver made is committed from its last look at the store; when another process pruned
    the thread meanwhile (a new generation holding the latest checkpoint), the checkpoint must land in the new
    generation, after that checkpoint."""
    writer = AgentFSSaver(agentfs.open(tmp_path / "s", durability="process"))
    other = AgentFSSaver(agentfs.open(tmp_path / "s", durability="process"))  # its own index: another process's view
    reference = InMemorySaver()
    for saver in (writer, reference):
        _step(saver, "t", "", None, "1f000000", 0)
        _step(saver, "t", "", "1f000000", "1f000001", 1)
    other.prune(["t"], strategy="keep_latest")
    for saver in (writer, reference):
        _step(saver, "t", "", "1f000001", "1f000002", 2)
    fresh = AgentFSSaver(agentfs.open(tmp_path / "s", durability="process"))
    got = [(t.checkpoint["id"], t.checkpoint["channel_values"], t.pending_writes) for t in fresh.list(_config("t"))]
    wanted = [(t.checkpoint["id"], t.checkpoint["channel_values"], t.pending_writes) for t in reference.list(_config("t"))]
    assert got == wanted[:2]  # the pruned thread: the checkpoint kept, and the new one after it
