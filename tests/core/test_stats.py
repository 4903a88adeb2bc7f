"""store.stats() and `agentfs stats [--json]`, checked against the raw files and known payload sizes.

Logical sizes are recomputed here from the payloads with msgpack itself (FORMAT.md: a state key's
value is its msgpack bytes, a list's without the array header; an artifact is its bytes).
"""

from __future__ import annotations

import datetime as dt
import os
import time
from pathlib import Path

import msgpack
import pytest
from ulid import ULID

import agentfs
from tests.cli.test_cli import cli, json_of
from tests.helpers import raw
from tests.sync.test_sync_daemon import wait_until

ID_LENGTH = 26


def packed(value: object) -> int:
    return len(msgpack.packb(value, use_bin_type=True))


def list_body(items: list[bytes]) -> int:
    return sum(packed(item) for item in items)


def records(store: agentfs.Store | Path, run: str, kind: str) -> dict[str, int]:
    """Id -> stored size of the run's records of one kind."""
    return {record_id: len(raw.record_bytes(store, run, kind, record_id)) for record_id in raw.record_ids(store, run, kind)}


def objects_stored(store: agentfs.Store | Path) -> tuple[int, int]:
    sizes = [len(raw.object_bytes(store, oid)) for oid in raw.object_ids(store)]
    return len(sizes), sum(sizes)


def test_stats_match_the_raw_files_and_the_payload_sizes(store: agentfs.Store) -> None:
    root = store.root
    expected_logical: dict[str, int] = {}
    created: dict[str, list[dt.datetime]] = {}
    messages: list[bytes] = []
    for step in range(12):
        messages.append(os.urandom(700 + 97 * step))
        artifacts = {"out.bin": os.urandom(5_000 * step)} if step % 3 == 0 else {}
        cp = store.run("team/conv").commit({"messages": messages, "step": step}, artifacts=artifacts)
        sizes = list_body(messages) + packed(step) + sum(len(data) for data in artifacts.values())
        expected_logical["team/conv"] = expected_logical.get("team/conv", 0) + sizes
        created.setdefault("team/conv", []).append(cp.created)
    solo = store.run("solo").commit(b"x" * 10)  # not a dict: stored whole under the key ""
    expected_logical["solo"] = packed(b"x" * 10)
    created["solo"] = [solo.created]
    head = store.run("team/conv").latest()
    assert head is not None
    forked = store.run("team/conv").fork(head.id, "forked").latest()  # borrows everything: same logical size
    assert forked is not None
    expected_logical["forked"] = list_body(messages) + packed(11)
    created["forked"] = [forked.created]
    assert store.run("solo").once("lookup", lambda: {"answer": 42}) == {"answer": 42}
    with store.run("tools-only").tool_call("search", {"q": "x" * 300}, key="k1") as call:
        call.result = "y" * 1000

    found = store.stats()
    assert [row.run for row in found.runs] == ["forked", "solo", "team/conv", "tools-only"]
    for row in found.runs:
        log = records(store, row.run, raw.LOG_RECORDS)
        journal = records(store, row.run, raw.JOURNAL_RECORDS)
        assert row.checkpoints == len(log)
        assert row.entry_bytes == sum(log.values())
        assert row.journal_records == len(journal) and row.journal_bytes == sum(journal.values())
        assert row.logical_bytes == expected_logical.get(row.run, 0)
        assert (row.first, row.last) == ((min(created[row.run]), max(created[row.run])) if row.run in created else (None, None))
    by_run = {row.run: row for row in found.runs}
    assert by_run["team/conv"].checkpoints == 12 and by_run["tools-only"].checkpoints == 0
    assert by_run["solo"].journal_records >= 2 and by_run["tools-only"].journal_bytes > 1300  # start and end of each call

    objects, object_bytes = objects_stored(root)
    assert (found.objects, found.object_bytes) == (objects, object_bytes) and objects > 0
    assert found.checkpoints == 14
    assert found.entry_bytes == sum(row.entry_bytes for row in found.runs)
    assert found.journal_bytes == by_run["solo"].journal_bytes + by_run["tools-only"].journal_bytes
    assert found.logical_bytes == sum(expected_logical.values())
    assert found.dedup_ratio == pytest.approx(found.logical_bytes / (object_bytes + found.entry_bytes))
    assert found.remotes == []


def test_dedup_ratio_is_well_above_one_for_a_growing_conversation(tmp_path: Path) -> None:
    """Incompressible messages, so the ratio measures dedup, not compression; a control of unrelated
    states of the same sizes stays near 1."""
    grown, control = agentfs.open(tmp_path / "grown"), agentfs.open(tmp_path / "control")
    messages: list[bytes] = []
    for _step in range(40):
        messages.append(os.urandom(1_500))
        grown.run("chat").commit({"messages": messages})
        control.run("chat").commit({"messages": [os.urandom(1_500) for _ in messages]})
    grown_stats, control_stats = grown.stats(), control.stats()
    assert grown_stats.logical_bytes == control_stats.logical_bytes == sum(list_body(messages[:n]) for n in range(1, 41))
    print(f"\ndedup ratio: growing conversation {grown_stats.dedup_ratio:.2f}x, unrelated states {control_stats.dedup_ratio:.2f}x")
    assert grown_stats.dedup_ratio is not None and grown_stats.dedup_ratio > 3
    assert control_stats.dedup_ratio is not None and control_stats.dedup_ratio < 1.1
    assert agentfs.open(tmp_path / "empty").stats().dedup_ratio is None


def test_remote_lag_before_and_after_a_push(tmp_path: Path) -> None:
    root = tmp_path / "store"
    url = (tmp_path / "remote").as_uri()
    with agentfs.open(root) as store:
        for i in range(3):
            store.run("r").commit({"i": i})
        with store.sync(url) as daemon:
            assert daemon.flush(timeout=30)
        (remote,) = store.stats().remotes
        assert (remote.url, remote.pushed_checkpoints, remote.lag_checkpoints, remote.lag_seconds) == (url, 3, 0, 0.0)
        assert remote.last_push is not None and remote.last_push <= time.time() and remote.last_error is None
        (state_dir,) = (root / "remotes").iterdir()
        assert len((state_dir / "entries").read_text().splitlines()) == 3  # the index, raw

        late = [store.run(name).commit({"late": name}).id for name in ("r", "other")]
        time.sleep(0.3)
        (remote,) = store.stats().remotes
        oldest = ULID.from_str(late[0]).milliseconds / 1000
        assert (remote.pushed_checkpoints, remote.lag_checkpoints) == (3, 2)
        assert time.time() - oldest - 0.05 <= remote.lag_seconds <= time.time() - oldest + 0.05
        status = json_of(cli("status", "--json", store=root))["remotes"][0]  # the same computation
        assert (status["lag_checkpoints"], status["pushed_checkpoints"], status["queue"]) == (2, 3, 2)

        assert cli("sync", url, store=root).returncode == 0
        (remote,) = store.stats().remotes
        assert (remote.pushed_checkpoints, remote.lag_checkpoints, remote.lag_seconds) == (5, 0, 0.0)


def test_a_remote_that_is_down_shows_its_error_and_lag(tmp_path: Path) -> None:
    (tmp_path / "blocker").write_text("nothing can be created below a file")
    url = (tmp_path / "blocker" / "remote").as_uri()
    with agentfs.open(tmp_path / "store") as store:
        store.run("r").commit({})
        daemon = store.sync(url, max_backoff=0.5)
        try:
            assert wait_until(lambda: any(r.last_error for r in store.stats().remotes), 20)
        finally:
            assert not daemon.stop(timeout=0.5)  # nothing could be drained
        (remote,) = store.stats().remotes
    assert remote.url == url and remote.lag_checkpoints == 1 and remote.pushed_checkpoints == 0
    assert remote.last_error is not None and "NotADirectoryError" in remote.last_error and remote.last_push is None


def test_stats_cli_text_and_json(tmp_path: Path) -> None:
    root = tmp_path / "store"
    empty = cli("stats", store=root)
    assert empty.returncode == 3 and "no agentfs store" in empty.stderr
    assert cli("init", store=root).returncode == 0
    text = cli("stats", store=root).stdout
    assert "checkpoints  0 in 0 runs" in text and "dedup        -" in text

    with agentfs.open(root) as store:
        for step in range(3):
            store.run("team/agent").commit({"step": step}, artifacts={"a.bin": b"z" * 2048})
        store.run("team/agent").once("k", lambda: 1)
    url = (tmp_path / "remote").as_uri()
    assert cli("sync", url, store=root).returncode == 0
    with agentfs.open(root) as store:
        found = store.stats()

    document = json_of(cli("stats", "--json", store=root))
    assert document["store"] == str(root)
    (run,) = document["runs"]
    (row,) = found.runs
    assert run == {
        "run": "team/agent",
        "checkpoints": 3,
        "first": row.first.isoformat(timespec="microseconds") if row.first else None,
        "last": row.last.isoformat(timespec="microseconds") if row.last else None,
        "logical_bytes": 3 * 2048 + sum(packed(step) for step in range(3)),
        "entry_bytes": row.entry_bytes,
        "journal_records": row.journal_records,
        "journal_bytes": row.journal_bytes,
    }
    assert run["journal_records"] >= 2
    totals = document["totals"]
    assert totals["objects"] == objects_stored(root)[0] and totals["object_bytes"] == objects_stored(root)[1]
    assert totals["checkpoints"] == 3 and totals["runs"] == 1
    assert totals["stored_bytes"] == totals["object_bytes"] + totals["entry_bytes"]
    assert totals["dedup_ratio"] == round(totals["logical_bytes"] / totals["stored_bytes"], 3)
    (remote,) = document["remotes"]
    assert (remote["remote"], remote["pushed_checkpoints"], remote["lag_checkpoints"]) == (url, 3, 0)

    text = cli("stats", store=root).stdout.splitlines()
    assert text[0].split() == ["RUN", "CHECKPOINTS", "FIRST", "LAST", "LOGICAL", "ENTRIES", "JOURNAL"]
    assert text[1].split()[:2] == ["team/agent", "3"] and "6.0 KiB" in text[1]
    assert "checkpoints  3 in 1 run" in text
    assert any(line.startswith("dedup ") and line.split()[1].endswith("x") for line in text)
    assert any(line.startswith(url) and line.split()[1:3] == ["3", "0"] for line in text)
