"""`agentfs runs`, `stats` and `log --thread` show LangGraph threads as threads; `--internal` shows their runs."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

pytest.importorskip("langgraph.checkpoint.base")

import agentfs
from agentfs.integrations.langgraph import AgentFSSaver
from tests.cli.test_cli import assert_error, cli, json_of
from tests.integrations.test_langgraph_lean_layout import NAMESPACES, OLD_STORE, _config, feed


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A store with a thread of the earlier layout ("old"), one of the lean layout ("chat") and a plain run."""
    shutil.copytree(OLD_STORE, tmp_path / "s")
    with agentfs.open(tmp_path / "s") as store:
        feed(AgentFSSaver(store), "chat", steps=5)
        store.run("notes").commit({"text": "not a thread"})
    return tmp_path / "s"


def _listed(root: Path, thread: str) -> dict[str, list[str]]:
    """Checkpoint ids per namespace, newest first, as the saver lists them."""
    with agentfs.open(root) as store:
        saver = AgentFSSaver(store)
        return {ns: [t.checkpoint["id"] for t in saver.list(_config(thread, ns=ns))] for ns in NAMESPACES}


def test_runs_and_stats_show_threads_not_their_runs(root: Path) -> None:
    expected = {thread: _listed(root, thread) for thread in ("chat", "old")}
    with agentfs.open(root) as store:
        every_run = store.runs()
    listed = json_of(cli("runs", "--json", store=root))
    assert [run["name"] for run in listed["runs"]] == ["notes"]
    threads = {thread["thread_id"]: thread for thread in listed["threads"]}
    assert sorted(threads) == ["chat", "old"]
    for thread, ids in expected.items():
        assert threads[thread]["namespaces"] == sorted(ns for ns in ids if ids[ns])
        assert threads[thread]["checkpoints"] == sum(len(found) for found in ids.values())
    internal = [name for thread in threads.values() for name in thread["runs"]]
    assert len(threads["old"]["runs"]) > len(threads["chat"]["runs"])  # the earlier layout: a run per checkpoint's writes
    assert set(internal) < set(every_run) and "notes" not in internal
    assert [run["name"] for run in json_of(cli("runs", "--internal", "--json", store=root))["runs"]] == every_run

    text = cli("runs", store=root).stdout
    assert "langgraph/" not in text and "THREAD" in text
    assert any(line.split()[:1] == ["chat"] and str(threads["chat"]["checkpoints"]) in line.split() for line in text.splitlines())
    assert "langgraph/" in cli("runs", "--internal", store=root).stdout

    stats = json_of(cli("stats", "--json", store=root))
    assert [row["run"] for row in stats["runs"]] == ["notes"]
    by_thread = {thread["thread_id"]: thread for thread in stats["threads"]}
    assert {thread: by_thread[thread]["checkpoints"] for thread in by_thread} == {t: threads[t]["checkpoints"] for t in threads}
    assert all(thread["logical_bytes"] > 0 and thread["entry_bytes"] > 0 for thread in by_thread.values())
    assert stats["totals"]["runs"] == len(every_run)
    assert "LangGraph threads among them" in cli("stats", store=root).stdout


def test_log_of_a_thread_lists_its_checkpoints_per_namespace(root: Path) -> None:
    for thread in ("chat", "old"):
        expected = _listed(root, thread)
        log = json_of(cli("log", "--thread", thread, "--json", store=root))
        assert {ns: [entry["checkpoint_id"] for entry in entries] for ns, entries in log["namespaces"].items()} == expected
        text = cli("log", "--thread", thread, store=root).stdout
        assert text.count("(latest)") == len(expected) and all(ids[0] in text for ids in expected.values())
        raw = log["namespaces"][""][0]["run"]
        assert cli("log", raw, store=root).returncode == 0  # an internal run is still a run
    assert_error(cli("log", "--thread", "nosuch", store=root), 3, "'nosuch' not found")
