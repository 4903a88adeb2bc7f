"""Divergence is surfaced. Two machines (two stores) append to the same parent
through one file remote; run.heads(), pull, sync, status and `log --graph` all say so."""

from __future__ import annotations

import json
from pathlib import Path

import agentfs
from tests.cli.test_cli import cli


def test_two_machines_appending_to_one_parent_make_two_heads_reported_everywhere(tmp_path: Path) -> None:
    url = (tmp_path / "remote").as_uri()
    first, second = tmp_path / "first", tmp_path / "second"
    with agentfs.open(first) as store:
        base = store.run("shared").commit({"step": 0}).id
    assert cli("sync", url, store=first).returncode == 0
    assert cli("pull", url, store=second).returncode == 0
    with agentfs.open(first) as store:
        mine = store.run("shared").commit({"step": 1, "by": "first"}).id
        assert store.run("shared").heads() == [mine]  # one line: no divergence
    with agentfs.open(second) as store:
        theirs = store.run("shared").commit({"step": 1, "by": "second"}).id
    assert cli("sync", url, store=first).returncode == 0
    sync = cli("sync", url, store=second)
    assert sync.returncode == 0 and "shared" not in sync.stderr  # the second store does not hold the first's line yet

    pulled = cli("pull", url, store=second)
    assert pulled.returncode == 0 and "diverged" in pulled.stderr and mine in pulled.stderr and theirs in pulled.stderr
    with agentfs.open(second) as store:
        run = store.run("shared")
        assert sorted(run.heads()) == sorted([mine, theirs])
        assert run.latest().id == max(mine, theirs)  # newest wins
        assert {run.get(mine).parent, run.get(theirs).parent} == {base}

    with agentfs.open(second) as store:  # a step after the newest head: the other line still stands, the push says so
        store.run("shared").commit({"step": 2})
        assert len(store.run("shared").heads()) == 2
    again = cli("sync", url, store=second)
    assert again.returncode == 0 and "diverged" in again.stderr

    status = cli("status", store=second)
    assert status.returncode == 0 and "diverged:   run shared: 2 heads" in status.stdout
    document = json.loads(cli("status", "--json", store=second).stdout)
    assert len(document["remotes"][0]["diverged"]["shared"]) == 2

    graph = cli("log", "shared", "--graph", store=second)
    assert graph.returncode == 0, graph.stderr
    rows = graph.stdout.splitlines()
    assert rows[0].startswith("run shared has diverged: 2 heads")
    assert any(row.startswith("| *") for row in rows) and rows[-2:] == ["|/", f"*  {base}"]
    assert json.loads(cli("log", "shared", "--json", store=second).stdout)["heads"] == store.run("shared").heads()
