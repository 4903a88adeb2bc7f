"""AgentFSSaver's reads: one look at the store per call, and that look sees every write another process acknowledged.

A read call (get_tuple, list, get_delta_channel_history) takes one look at the segments when it
starts and reads its runs' heads and ids from it (langgraph_view.py), instead of a look per run.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("langgraph.checkpoint.base")

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import empty_checkpoint

import agentfs
from agentfs.errors import FormatError
from agentfs.integrations.langgraph import AgentFSSaver
from agentfs.integrations.langgraph_layout import INITIAL_GENERATION, Namespace

THREAD: RunnableConfig = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}

# Puts checkpoint `step` (messages m0..m<step>) and one write for it each time a step number arrives on stdin; prints
# the checkpoint id once both calls returned: from then on, the write is acknowledged.
WRITER = textwrap.dedent(
    """
    import sys
    from langgraph.checkpoint.base import empty_checkpoint
    from agentfs.integrations.langgraph import AgentFSSaver

    saver = AgentFSSaver(sys.argv[1])
    config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
    for line in sys.stdin:
        step = int(line)
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = {"messages": [f"m{i}" for i in range(step + 1)], "step": step}
        checkpoint["channel_versions"] = {"messages": step + 1, "step": step + 1}
        config = saver.put(config, checkpoint, {"step": step}, {"messages": step + 1, "step": step + 1})
        saver.put_writes(config, [("step", step + 1)], f"task-{step}")
        print(config["configurable"]["checkpoint_id"], flush=True)
    saver.close()
    """
)


def _at(checkpoint_id: str) -> RunnableConfig:
    return {"configurable": {**THREAD["configurable"], "checkpoint_id": checkpoint_id}}


def _check(tup: Any, checkpoint_id: str, step: int) -> None:
    assert tup is not None and tup.config["configurable"]["checkpoint_id"] == checkpoint_id
    assert tup.checkpoint["channel_values"] == {"messages": [f"m{i}" for i in range(step + 1)], "step": step}
    assert tup.pending_writes == [(f"task-{step}", "step", step + 1)]


def test_every_read_sees_what_another_process_acknowledged_before_it(tmp_path: Path) -> None:
    path = tmp_path / "store"
    reader = AgentFSSaver(agentfs.open(path))
    assert reader.get_tuple(THREAD) is None  # the reader has looked at the store before the writer starts
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert writer.stdin is not None and writer.stdout is not None
    acknowledged: list[str] = []

    def latest(step: int) -> None:
        _check(reader.get_tuple(THREAD), acknowledged[-1], step)

    def by_id(step: int) -> None:
        _check(reader.get_tuple(_at(acknowledged[-1])), acknowledged[-1], step)

    def listed(step: int) -> None:
        found = list(reader.list(THREAD, limit=3))
        assert [tup.config["configurable"]["checkpoint_id"] for tup in found] == acknowledged[::-1][:3]
        _check(found[0], acknowledged[-1], step)

    def history(step: int) -> None:
        seen = reader.get_delta_channel_history(config=THREAD, channels=["step"])["step"]
        assert seen["writes"] == ([] if step == 0 else [(f"task-{step - 1}", "step", step)])

    reads: list[Callable[[int], None]] = [latest, by_id, listed, history]
    try:
        for step in range(12):
            writer.stdin.write(f"{step}\n")
            writer.stdin.flush()
            acknowledged.append(writer.stdout.readline().strip())
            first = reads[step % len(reads)]  # each kind of read is, in turn, the first call after the writer's acknowledgement
            for read in [first, *(read for read in reads if read is not first)]:
                read(step)
    finally:
        writer.stdin.close()
        assert writer.wait(timeout=60) == 0
        reader.store.close()


def test_a_read_looks_at_the_segments_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = agentfs.open(tmp_path / "store", durability="process")
    saver = AgentFSSaver(store)
    configs = []
    config = THREAD
    for step in range(4):
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = {"step": step}
        checkpoint["channel_versions"] = {"step": step + 1}
        config = saver.put(config, checkpoint, {"step": step}, {"step": step + 1})
        saver.put_writes(config, [("step", step + 1)], f"task-{step}")
        configs.append(config)
    saver.put_writes(configs[1], [("step", 99)], "late-task")  # not the head: its batch lands in the namespace's late run
    for thread in ("u", "v"):
        saver.put({"configurable": {"thread_id": thread, "checkpoint_ns": ""}}, empty_checkpoint(), {}, {})
    segments = os.fspath(store.engine.segments_dir)
    looks: list[str] = []
    listdir = os.listdir

    def counted(path: Any = ".") -> list[str]:
        looks.append(os.fspath(path))
        return listdir(path)

    monkeypatch.setattr(os, "listdir", counted)
    reads: dict[str, tuple[Callable[[], Any], int]] = {
        "get_tuple": (lambda: saver.get_tuple(THREAD), 1),
        "get_tuple by id": (lambda: saver.get_tuple(configs[1]), 1),
        "list": (lambda: list(saver.list(THREAD, limit=10)), 1),
        "list before": (lambda: list(saver.list(THREAD, before=configs[2])), 1),
        "delta history": (lambda: saver.get_delta_channel_history(config=THREAD, channels=["step"]), 1),
        # the listing of runs, then one view for every thread's ctl run and namespaces
        "list of every thread": (lambda: list(saver.list(None)), 2),
        "list of every namespace": (lambda: list(saver.list({"configurable": {"thread_id": "t"}})), 2),
    }
    for name, (read, wanted) in reads.items():
        looks.clear()
        assert read()
        assert looks.count(segments) == wanted, f"{name} looked at segments/ {looks.count(segments)} times"
    assert ("late-task", "step", 99) in saver.get_tuple(configs[1]).pending_writes  # type: ignore[union-attr]
    store.close()


def test_a_channel_its_checkpoint_holds_no_value_for_is_a_format_error(tmp_path: Path) -> None:
    store = agentfs.open(tmp_path / "store", durability="process")
    saver = AgentFSSaver(store)
    checkpoint = empty_checkpoint()
    checkpoint["channel_values"] = {"step": 1}
    checkpoint["channel_versions"] = {"step": 1}
    saver.put(THREAD, checkpoint, {}, {"step": 1})
    run = saver.generations.checkpoints(Namespace("t", INITIAL_GENERATION, ""))
    head = run.get(run.head_id() or "")
    state = dict(head.state)
    state["blobs"] = {"step": [1, None], "lost": [1, None]}  # names a channel whose value it does not hold
    later = empty_checkpoint()
    run.commit(state, metadata={**head.metadata, "checkpoint_id": later["id"], "parent_checkpoint_id": checkpoint["id"]})
    with pytest.raises(FormatError, match=f"{run.name}@.* holds no value for channel 'lost'"):
        saver.get_tuple(THREAD)
    store.close()
