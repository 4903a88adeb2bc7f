"""`agentfs journal RUN` and its alias `timeline`, run as a user runs them: a subprocess per command."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import agentfs
from agentfs.format.keys import JOURNAL_RECORDS
from tests.helpers import raw

AGENTFS = shutil.which("agentfs", path=str(Path(sys.executable).parent))
COMMAND = [AGENTFS] if AGENTFS else [sys.executable, "-m", "agentfs.cli.main"]
ENV = {key: value for key, value in os.environ.items() if key != "AGENTFS_STORE"}
RUN = "agent/tools"


def cli(store: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*COMMAND, "--store", str(store), *args], capture_output=True, text=True, env=ENV, timeout=60, check=False)


def json_of(result: subprocess.CompletedProcess[str]) -> Any:
    assert result.returncode == 0 and result.stderr == "", result
    return json.loads(result.stdout)


def interrupted() -> None:
    raise KeyboardInterrupt


def failing() -> None:
    raise ValueError("quota exceeded")


@pytest.fixture
def root(tmp_path: Path) -> Path:
    """A run whose journal holds one call of each outcome: ok, error, in flight, result not recorded."""
    path = tmp_path / ".agentfs"
    with agentfs.open(path) as store:
        run = store.run(RUN)
        run.once("search:cats", lambda query: {"hits": [query, "\x1b[31mred"]}, "cats")
        with pytest.raises(ValueError):
            run.once("upload", failing)
        with pytest.raises(KeyboardInterrupt):
            run.once("charge", interrupted)
        run.once("handle", lambda: object())
    return path


def test_journal_lists_one_line_per_call(root: Path) -> None:
    result = cli(root, "journal", RUN)
    assert result.returncode == 0 and result.stderr == "", result
    header, *lines = result.stdout.splitlines()
    assert header.split() == ["STARTED", "STATUS", "KEY", "TOOL", "TOOK", "OUTCOME"]
    search, upload, charge, handle = lines
    for line, key in zip(lines, ["search:cats", "upload", "charge", "handle"], strict=True):
        assert f" {key} " in line
    assert " ok " in search and '{"hits": ["cats", "\\u001b[31mred"]}' in search and " ms " in search
    assert " error " in upload and "builtins.ValueError: quota exceeded" in upload
    assert " in flight " in charge and f"pid {os.getpid()}" in charge and "no end recorded" in charge
    assert "result not recorded" in handle
    assert "\x1b" not in result.stdout  # control characters from recorded data are never printed raw
    assert cli(root, "timeline", RUN).stdout == result.stdout


def test_journal_json_renders_calls_and_events(root: Path) -> None:
    document = json_of(cli(root, "journal", RUN, "--json"))
    assert document["run"] == RUN and document["damaged"] == []
    calls = {call["key"]: call for call in document["calls"]}
    assert list(calls) == ["search:cats", "upload", "charge", "handle"]
    search = calls["search:cats"]
    assert (search["status"], search["attempts"], search["result"]) == ("ok", 1, {"hits": ["cats", "\x1b[31mred"]})
    assert search["args"] == {"args": ["cats"], "kwargs": {}} and search["writer"]["pid"] == os.getpid()
    assert search["seconds"] >= 0 and search["finished"] >= search["started"] and search["unreadable"] == []
    assert calls["upload"]["error"] == {"type": "builtins.ValueError", "message": "quota exceeded"}
    assert calls["upload"]["result"] is None
    charge = calls["charge"]
    assert (charge["status"], charge["finished"], charge["end_id"], charge["seconds"]) == ("in_flight", None, None, None)
    assert calls["handle"]["status"] == "ok" and "builtins.object" in calls["handle"]["unrecorded"]

    events = json_of(cli(root, "timeline", RUN, "--events", "--json"))["events"]
    assert [(e["key"], e["kind"]) for e in events] == [
        ("search:cats", "start"),
        ("search:cats", "ok"),
        ("upload", "start"),
        ("upload", "error"),
        ("charge", "start"),
        ("handle", "start"),
        ("handle", "ok"),
    ]
    assert events[1]["call"] == events[0]["id"] and events[1]["result"] == search["result"]
    assert events[0]["args"] == search["args"] and events[6]["result"] is None and events[6]["unrecorded"]


def test_journal_events_lists_one_line_per_record(root: Path) -> None:
    result = cli(root, "journal", RUN, "--events")
    assert result.returncode == 0, result
    header, *lines = result.stdout.splitlines()
    assert header.split() == ["ID", "TIME", "EVENT", "KEY", "TOOL", "DETAIL"]
    with agentfs.open(root) as store:
        assert [line.split()[0] for line in lines] == raw.record_ids(store, RUN, JOURNAL_RECORDS)
    assert [line.split()[3] for line in lines] == ["start", "ok", "start", "error", "start", "start", "ok"]
    assert 'args {"args": ["cats"], "kwargs": {}}' in lines[0]


def test_damaged_records_are_reported_on_stderr(root: Path) -> None:
    with agentfs.open(root) as store:
        end = raw.record_ids(store, RUN, JOURNAL_RECORDS)[1]
        raw.set_record_bytes(store, RUN, JOURNAL_RECORDS, end, raw.record_bytes(store, RUN, JOURNAL_RECORDS, end)[:-1])
    result = cli(root, "journal", RUN)
    assert result.returncode == 0
    assert result.stderr.startswith("agentfs: warning: skipped journal record") and end in result.stderr
    assert "search:cats" in result.stdout and " in flight " in result.stdout.splitlines()[1]


def test_unknown_runs_and_bad_names(root: Path) -> None:
    missing = cli(root, "journal", "no/such/run")
    assert missing.returncode == 3 and "no/such/run" in missing.stderr and "not found" in missing.stderr
    assert cli(root, "timeline", "bad name!").returncode == 2
    assert cli(root.parent / "nowhere", "journal", RUN).returncode == 3
    with agentfs.open(root) as store:
        store.run("plain").commit({"step": 1})
    plain = cli(root, "journal", "plain")  # a run with checkpoints and no journal: says so
    assert (plain.returncode, plain.stderr) == (0, "")
    assert plain.stdout.startswith("run 'plain' has no journal records")
    assert json_of(cli(root, "journal", "plain", "--json")) == {"run": "plain", "damaged": [], "calls": []}
