"""Divergence means divergence: a checkpoint that retention keeps only because something needs it
(a fork's source, a checkpoint borrowed from) is not a second head once the line that went on from
it was pruned. Each retention shape (keep_last, keep_within, the store policy through gc, a run's
delete) with each kind of need (a fork into another run, a borrow within the run, LangGraph's own
forks): run.heads() has one head, and sync, status and `log --graph` say nothing of divergence.
Two machines appending to one parent after a prune stay two heads (the rule hides no real divergence)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import agentfs
from agentfs.engine.lineage import diverged
from agentfs.format.refs import INLINE_MAX, PACK_MAX
from agentfs.sync.pack_remote import PackRemote
from agentfs.sync.pull import pull
from agentfs.sync.push import Pusher
from tests.cli.test_cli import cli

STEPS = 5


def forked_into_another_run(store: agentfs.Store) -> str:
    """Five checkpoints; a fork from the first into run `other`: the first is the fork's source. Returns its id."""
    run = store.run("main")
    ids = [run.commit({"step": step}).id for step in range(STEPS)]
    run.fork(ids[0], "other")
    return ids[0]


def borrowed_within_the_run(store: agentfs.Store) -> str:
    """The fifth checkpoint reuses the first's small artifact, packed in the first's entry: the fifth borrows from it."""
    run = store.run("main")
    first = run.commit({"step": 0}, artifacts={"notes.txt": bytes(range(256)) * (INLINE_MAX // 256 + 4)})  # packed, not inline
    for step in range(1, STEPS - 1):
        run.commit({"step": step})
    assert INLINE_MAX < first.artifacts["notes.txt"].size <= PACK_MAX
    last = run.commit({"step": STEPS - 1}, artifacts={"notes.txt": first.artifacts["notes.txt"]})
    assert ("main", first.id) in store.engine.read_entry("main", last.id).borrowed()  # the shape this test is about
    return first.id


SHAPES: dict[str, Callable[[agentfs.Store], str]] = {
    "fork into another run": forked_into_another_run,
    "borrow within the run": borrowed_within_the_run,
}


def prune_keep_last(store: agentfs.Store) -> None:
    store.run("main").prune(keep_last=2)


def prune_keep_within(store: agentfs.Store) -> None:
    store.run("main").prune(keep_within=0)  # every checkpoint but the head is older than now


def policy_through_gc(store: agentfs.Store) -> None:
    store.set_retention(keep_last=2)
    store.gc(grace=0)


RETENTION: dict[str, Callable[[agentfs.Store], None]] = {
    "keep_last": prune_keep_last,
    "keep_within": prune_keep_within,
    "store policy via gc": policy_through_gc,
}


@pytest.mark.parametrize("retention", RETENTION, ids=list(RETENTION))
@pytest.mark.parametrize("shape", SHAPES, ids=list(SHAPES))
def test_a_checkpoint_kept_for_a_need_is_not_a_second_head(tmp_path: Path, shape: str, retention: str) -> None:
    root = tmp_path / "store"
    with agentfs.open(root) as store:
        kept = SHAPES[shape](store)
        RETENTION[retention](store)
        run = store.run("main")
        assert kept in run.ids()  # kept: something needs it
        assert run.heads() == [run.ids()[-1]]
        assert diverged(store.engine, set(store.runs())) == {}
        assert run.get(kept).state == {"step": 0}


def test_cli_and_sync_report_no_divergence_after_a_prune_kept_a_fork_source(tmp_path: Path) -> None:
    """The problem as a user met it: commit 5, fork from the first, prune(keep_last=2), then sync, status, log --graph."""
    root, url = tmp_path / "store", (tmp_path / "remote").as_uri()
    with agentfs.open(root) as store:
        first = forked_into_another_run(store)
        store.run("main").prune(keep_last=2)
        head = store.run("main").ids()[-1]
    sync = cli("sync", url, store=root)
    assert sync.returncode == 0, sync.stderr
    assert "diverged" not in sync.stderr
    status = json.loads(cli("status", "--json", store=root).stdout)
    assert status["remotes"][0]["diverged"] == {}
    graph = cli("log", "main", "--graph", store=root)
    assert graph.returncode == 0 and "diverged" not in graph.stdout
    assert [row for row in graph.stdout.splitlines() if "(head)" in row] == [f"*  {head}  (head)"]
    assert any(row.endswith(first) for row in graph.stdout.splitlines())  # still drawn, not marked a head
    assert json.loads(cli("log", "main", "--json", store=root).stdout)["heads"] == [head]
    with agentfs.open(tmp_path / "fresh", remote=url) as fresh:  # a machine that reads it from the remote agrees
        assert fresh.run("main").heads() == [head]


def test_a_deleted_run_kept_for_its_forks_has_one_head(tmp_path: Path) -> None:
    with agentfs.open(tmp_path / "store") as store:
        run = store.run("main")
        ids = [run.commit({"step": step}).id for step in range(STEPS)]
        run.fork(ids[0], "from-first")
        run.fork(ids[2], "from-third")
        run.delete()
        assert run.ids() == [ids[0], ids[2]]
        assert run.heads() == [ids[2]]


def _push(root: Path, url: str) -> None:
    with agentfs.open(root) as store:
        Pusher(store.engine, PackRemote(url, {})).push()


def _pull(root: Path, url: str) -> dict[str, list[str]]:
    with agentfs.open(root) as store:
        return pull(store.engine, PackRemote(url, {})).diverged


def test_two_machines_diverging_after_a_prune_stay_two_heads(tmp_path: Path) -> None:
    """The other side: lines newer than the run's prunes are real divergence, on every machine."""
    url = (tmp_path / "remote").as_uri()
    first, second = tmp_path / "first", tmp_path / "second"
    with agentfs.open(first) as store:
        for step in range(STEPS):
            store.run("shared").commit({"step": step})
        store.run("shared").prune(keep_last=1)
    _push(first, url)
    _pull(second, url)
    with agentfs.open(second) as store:
        theirs = store.run("shared").commit({"by": "second"}).id
    with agentfs.open(first) as store:
        mine = store.run("shared").commit({"by": "first"}).id
    _push(first, url)
    _push(second, url)
    assert _pull(second, url) == {"shared": sorted([theirs, mine])}
    with agentfs.open(second) as store:
        store.run("shared").prune(keep_last=2)
        assert store.run("shared").heads() == sorted([theirs, mine])
    with agentfs.open(tmp_path / "fresh", remote=url) as fresh:
        assert fresh.run("shared").heads() == sorted([theirs, mine])


def _langgraph_forks(root: Path) -> dict[str, Any]:
    """A LangGraph thread run to its end, forked from an earlier checkpoint twice, then pruned by the saver."""
    pytest.importorskip("langgraph.graph")
    from langgraph.graph import START, StateGraph

    from agentfs.integrations.langgraph import AgentFSSaver

    with agentfs.open(root) as store:
        saver = AgentFSSaver(store)
        builder = StateGraph(dict).add_node("step", lambda state: {"n": state.get("n", 0) + 1}).add_edge(START, "step")
        graph = builder.compile(checkpointer=saver)
        thread: Any = {"configurable": {"thread_id": "t"}}
        for _ in range(3):
            graph.invoke({"n": 0}, thread)
        earlier = list(graph.get_state_history(thread))[-2].config
        for _ in range(2):
            graph.invoke(None, graph.update_state(earlier, {"n": 10}))
        saver.prune(["t"], strategy="keep_latest")
        return diverged(store.engine, set(store.runs()))


def test_langgraph_forks_and_the_savers_prune_make_no_divergence(tmp_path: Path) -> None:
    assert _langgraph_forks(tmp_path / "store") == {}


def test_a_push_of_only_the_retirement_that_ended_a_divergence_clears_it_from_status(tmp_path: Path) -> None:
    url = (tmp_path / "remote").as_uri()
    first, second = tmp_path / "first", tmp_path / "second"
    with agentfs.open(first) as store:
        store.run("shared").commit({"step": 0})
    assert cli("sync", url, store=first).returncode == 0
    assert cli("pull", url, store=second).returncode == 0
    with agentfs.open(first) as store:
        store.run("shared").commit({"step": 1, "by": "first"})
    with agentfs.open(second) as store:
        store.run("shared").commit({"step": 1, "by": "second"})
    assert cli("sync", url, store=first).returncode == 0
    assert cli("pull", url, store=second).returncode == 0
    assert cli("sync", url, store=second).returncode == 0
    assert "diverged:   run shared" in cli("status", store=second).stdout

    with agentfs.open(second) as store:  # the operator keeps the newest line only: the other head is retired
        store.run("shared").prune(keep_last=1)
        assert len(store.run("shared").heads()) == 1
    pushed = cli("sync", url, store=second)  # carries the retirement record and no checkpoint
    assert pushed.returncode == 0 and "diverged" not in pushed.stderr, pushed.stderr
    status = cli("status", store=second)
    assert status.returncode == 0 and "diverged" not in status.stdout, status.stdout
    assert json.loads(cli("status", "--json", store=second).stdout)["remotes"][0]["diverged"] == {}
