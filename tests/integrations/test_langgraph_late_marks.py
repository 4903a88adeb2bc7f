"""A checkpoint's LateMark: a fresh saver reads the latest checkpoint's late write batches, not every late batch of the
thread, and reads them all when the mark no longer holds. Every answer is compared with InMemorySaver fed the same calls."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

pytest.importorskip("langgraph.checkpoint.base")

from langgraph.checkpoint.base import BaseCheckpointSaver
from langgraph.checkpoint.memory import InMemorySaver

import agentfs
from agentfs.core.checkpoint import Checkpoint as Commit
from agentfs.errors import AgentFSError
from agentfs.integrations.langgraph import AgentFSSaver
from agentfs.integrations.langgraph.late_marks import LateMark, read_mark
from agentfs.integrations.langgraph.namespace_log import NamespaceLog
from tests.helpers import raw
from tests.integrations.test_langgraph_lean_layout import _config, _step

STEPS = 12
ULID = "01JC0000000000000000000000"


def _thread(target: BaseCheckpointSaver[Any], thread: str = "t") -> None:
    """STEPS checkpoints; after each, a write to the one before (late: no longer the head), and a write to the next
    one before its put (late: not saved yet), as LangGraph's background checkpointing makes them."""
    previous = None
    for step in range(STEPS):
        checkpoint_id = f"1f0{step:05d}"
        target.put_writes(_config(thread, checkpoint_id), [("log", f"early {step}")], f"early-{step}")
        config = _step(target, thread, "", previous, checkpoint_id, step)
        if previous is not None:
            target.put_writes(_config(thread, previous), [("log", f"slow {step}")], f"slow-{step}")
        previous = config["configurable"]["checkpoint_id"]


def _swept(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The ids of every commit read through Run.get_many (how late batches are read) from now on."""
    read: list[str] = []
    real = agentfs.Run.get_many
    monkeypatch.setattr(agentfs.Run, "get_many", lambda self, ids: read.extend(ids) or real(self, ids))
    return read


@pytest.mark.parametrize("encrypted", [False, True], ids=["plain", "encrypted"])
def test_a_fresh_saver_reads_only_the_latest_checkpoints_late_batches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, encrypted: bool
) -> None:
    """Planted (late_for ignoring the mark): the fresh saver reads all 2 * STEPS - 1 late batches."""
    options: dict[str, Any] = {"durability": "process", "encryption": agentfs.Encryption(passphrase="late") if encrypted else None}
    reference = InMemorySaver()
    with AgentFSSaver(tmp_path / "s", **options) as writer:
        for target in (writer, reference):
            _thread(target)
    read = _swept(monkeypatch)
    with AgentFSSaver(tmp_path / "s", **options) as fresh:
        latest = fresh.get_tuple(_config("t"))
        assert latest is not None and latest.pending_writes == reference.get_tuple(_config("t")).pending_writes  # type: ignore[union-attr]
        assert ("early-11", "log", "early 11") in latest.pending_writes
        # its own early write, and the one batch appended after its put (the slow write to the checkpoint before)
        assert len(read) == 2, read
        for step in (0, 5, 10):  # older checkpoints, through their marks and the batches after them
            config = _config("t", f"1f0{step:05d}")
            assert fresh.get_tuple(config).pending_writes == reference.get_tuple(config).pending_writes  # type: ignore[union-attr]


def test_a_mark_whose_count_the_late_run_does_not_match_is_not_trusted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A writer whose look at the late run missed a batch (another machine's, synced in later under an older id) notes a
    count the run no longer matches: readers read every late batch instead.

    Planted (LateMark.start not comparing the count): the latest checkpoint's early write is missing."""
    real = NamespaceLog.late_mark

    def blind(self: NamespaceLog, checkpoint_id: str, parent: Commit | None) -> LateMark:
        mark = real(self, checkpoint_id, parent)
        return mark._replace(count=mark.count - 1, own=[]) if mark.own else mark  # as if it never saw its own batch

    monkeypatch.setattr(NamespaceLog, "late_mark", blind)
    reference = InMemorySaver()
    with AgentFSSaver(tmp_path / "s", durability="process") as writer:
        for target in (writer, reference):
            _thread(target)
    with AgentFSSaver(tmp_path / "s", durability="process") as fresh:
        latest = fresh.get_tuple(_config("t"))
        assert latest is not None and ("early-11", "log", "early 11") in latest.pending_writes
        assert latest.pending_writes == reference.get_tuple(_config("t")).pending_writes  # type: ignore[union-attr]


def test_a_late_batch_retention_removed_is_not_read(tmp_path: Path) -> None:
    """Retention leaves fewer ids up to the mark's head than it counted: every late batch left is read instead.

    Planted (LateMark.start trusting any mark, none of its checks): the read asks for the removed batch (NotFound)."""
    reference = InMemorySaver()
    with AgentFSSaver(tmp_path / "s", durability="process") as writer:
        for target in (writer, reference):
            _thread(target)
        (late,) = [name for name in writer.store.runs() if name.endswith("/late")]
        writer.store.run(late).prune(keep_last=1)  # the newest: a write to the checkpoint before the latest
    with AgentFSSaver(tmp_path / "s", durability="process") as fresh:
        latest = fresh.get_tuple(_config("t"))
        expected = reference.get_tuple(_config("t"))
        assert latest is not None and expected is not None
        assert latest.pending_writes == [write for write in expected.pending_writes if write[0] != "early-11"]


@pytest.mark.parametrize(
    "raw",
    [
        None,
        "late",
        {"head": "not an id", "count": 0, "own": [], "ahead": {}},
        {"head": None, "count": -1, "own": [], "ahead": {}},
        {"head": None, "count": True, "own": [], "ahead": {}},
        {"head": None, "count": 0, "own": ["x"], "ahead": {}},
        {"head": None, "count": 0, "own": [], "ahead": {"1f0": [7]}},
        {"head": None, "count": 0, "own": [], "ahead": []},
    ],
)
def test_a_malformed_mark_is_none(raw: Any) -> None:
    assert read_mark(cast(Commit, SimpleNamespace(metadata={"late": raw}))) is None
    good = {"head": ULID, "count": 1, "own": [ULID], "ahead": {"1f0": [ULID]}}
    assert read_mark(cast(Commit, SimpleNamespace(metadata={"late": good}))) == LateMark(ULID, 1, [ULID], {"1f0": [ULID]})


def test_a_damaged_late_batch_a_mark_names_is_refused_by_a_fresh_saver(tmp_path: Path) -> None:
    """The mark says which batches to read; each is still read from the store and checked there: a damaged one fails
    the read, as when every late batch was read. Planted (late_for leaving out `own`): the read succeeds without it."""
    with AgentFSSaver(tmp_path / "s", durability="process") as writer:
        _thread(writer)
        (late,) = [name for name in writer.store.runs() if name.endswith("/late")]
        (commit,) = [cp for cp in writer.store.run(late).history() if cp.metadata["checkpoint_id"] == "1f000011"]
        raw.corrupt_record(writer.store, late, raw.LOG_RECORDS, commit.id)
    with AgentFSSaver(tmp_path / "s", durability="process") as fresh, pytest.raises(AgentFSError, match=commit.id):
        fresh.get_tuple(_config("t"))
