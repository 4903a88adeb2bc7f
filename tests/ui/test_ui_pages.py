"""agentfs ui pagination: the runs list and a run's page show one page at a time and link to the next."""

from __future__ import annotations

import re
from pathlib import Path

from starlette.testclient import TestClient

import agentfs
from agentfs.cli.main import main
from agentfs.ui.app import Settings, create_app
from agentfs.ui.lineage import Heads
from agentfs.ui.listing import PAGE
from agentfs.ui.security import COOKIE, Guard
from agentfs.ui.views import RUN_PAGE


def client(store: agentfs.Store) -> TestClient:
    guard = Guard()
    guard.serve_at("127.0.0.1", 8123)
    browser = TestClient(create_app(store, guard, Settings()), base_url="http://127.0.0.1:8123")
    browser.cookies.set(COOKIE, guard.token)
    return browser


def test_runs_list_and_run_page_are_paginated(tmp_path: Path) -> None:
    with agentfs.open(tmp_path, durability="process") as store:
        for index in range(PAGE + 5):
            store.run(f"agent-{index:03d}").commit({"i": index})
        run = store.run("agent-000")
        ids = [run.head_id()] + [run.commit({"i": step}).id for step in range(RUN_PAGE + 10)]
        browser = client(store)
        first = browser.get("/").text
        assert first.count('class="run-link"') == PAGE and 'id="next-page"' in first and f"{PAGE + 5} entries" in first
        second = browser.get("/?page=1").text
        assert re.findall(r'class="run-link" href="/run\?name=([^"]+)"', second) == [
            f"agent-{index:03d}" for index in range(PAGE, PAGE + 5)
        ]
        assert 'id="next-page"' not in second
        newest = browser.get("/run?name=agent-000").text
        shown = re.findall(r'class="cp-link" href="/checkpoint\?run=agent-000&amp;id=(\w+)"', newest)
        assert shown == ids[::-1][:RUN_PAGE] and 'id="older"' in newest
        older = browser.get("/run?name=agent-000&page=1").text
        assert re.findall(r'class="cp-link" href="/checkpoint\?run=agent-000&amp;id=(\w+)"', older) == ids[::-1][RUN_PAGE:]


def test_heads_follow_new_commits_and_a_pulled_divergence(tmp_path: Path) -> None:
    url = (tmp_path / "remote").as_uri()
    mine, other = tmp_path / "mine", tmp_path / "other"
    with agentfs.open(mine) as store:
        store.run("shared").commit({"step": 0})
    assert main(["--store", str(mine), "sync", url]) == 0
    assert main(["--store", str(other), "pull", url]) == 0
    with agentfs.open(other) as store:
        theirs = store.run("shared").commit({"step": 1, "by": "other"}).id  # older than mine: a pull inserts it before mine
    assert main(["--store", str(other), "sync", url]) == 0
    with agentfs.open(mine) as store:
        run = store.run("shared")
        heads = Heads(store)
        first = run.commit({"step": 1, "by": "mine"}).id
        assert heads.of("shared") == [first]
        second = run.commit({"step": 2}).id
        assert heads.of("shared") == [second]  # read from the one new manifest
    assert main(["--store", str(mine), "pull", url]) == 0
    with agentfs.open(mine) as store:
        ids = store.run("shared").ids()
        assert ids.index(theirs) < ids.index(second)
        assert heads.of("shared") == sorted([theirs, second]) == store.run("shared").heads()


def test_heads_warm_up_looks_at_every_run_and_stops_when_the_store_closes(tmp_path: Path) -> None:
    with agentfs.open(tmp_path, durability="process") as store:
        for name in ("a", "b"):
            for step in range(30):
                store.run(name).commit({"step": step})
        heads = Heads(store)
        heads.warm().join(60)
        assert {name: heads.of(name) for name in ("a", "b")} == {
            "a": store.run("a").heads(),
            "b": store.run("b").heads(),
        }
        assert set(heads._known) == {"a", "b"}  # both looked at before any page asked
        late = heads.warm()
    late.join(60)  # the store closed under it: it ends, without an exception reaching threading's hook
    assert not late.is_alive()


def test_a_fork_source_kept_by_a_prune_is_no_second_head_on_the_page(tmp_path: Path) -> None:
    """Heads as engine/lineage.py defines them (tests/core/test_divergence_retention.py): the kept fork point is plain."""
    with agentfs.open(tmp_path, durability="process") as store:
        run = store.run("main")
        ids = [run.commit({"step": step}).id for step in range(5)]
        run.fork(ids[0], "other")
        heads = Heads(store)
        assert heads.of("main") == [ids[-1]]
        run.prune(keep_last=2)
        assert ids[0] in run.ids()  # kept: the fork needs it, and no kept checkpoint names it as parent
        assert heads.of("main") == run.heads() == [ids[-1]]
        page = client(store).get("/run?name=main").text
        assert 'id="divergence"' not in page and page.count('class="cp-link"') == 3
