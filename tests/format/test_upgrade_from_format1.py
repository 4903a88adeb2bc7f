"""`agentfs upgrade`: a format-1 store made by the format-1 code becomes format 2 in place.

The store is the committed test data (tests/data/format1-store.tar.gz); the upgrade runs as the real
CLI in a real process; segments are checked with raw reads, record by record, byte for byte, against
the format-1 files (tests/helpers/format1_store.py). Crashes are SIGKILLs of the real process at
several points, then a re-run; power loss is the crash-state harness (tests/crashsim).
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import agentfs
from agentfs.engine.upgrade import read_format
from agentfs.format import kinds
from tests.crashsim.explore import explore
from tests.crashsim.upgrade_check import check_upgrade
from tests.helpers.format1_store import compare_with_json, described, expected_records, extract, format1_files, missing, segment_records

pytestmark = pytest.mark.timeout(120)

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
FORMAT1_NAMES = ("objects", "runs", "forks", "locks/runs", "locks/pruned", "remotes")


def agentfs_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "agentfs.cli.main", *args], capture_output=True, text=True, env=ENV, timeout=60)


def tree(root: Path) -> dict[str, bytes | None]:
    """Every file (bytes) and directory (None) under root."""
    return {p.relative_to(root).as_posix(): (p.read_bytes() if p.is_file() else None) for p in sorted(root.rglob("*"))}


def assert_upgraded(root: Path, expected: dict[tuple[int, bytes], bytes]) -> None:
    """root is a complete format-2 store: every format-1 record in its segments, no format-1 name left."""
    assert read_format(root)[0] == 2
    found, problems = segment_records(root)
    assert not problems
    assert not missing(expected, found)
    assert set(found) == set(expected), "the segments hold records the format-1 store did not"
    assert not [name for name in FORMAT1_NAMES if (root / name).exists()]


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return extract(tmp_path)


def test_upgrade_puts_every_record_in_segments_byte_for_byte(store: Path) -> None:
    expected = expected_records(store)
    config = json.loads((store / "config").read_text())
    assert {kind for kind, _key in expected} == set(kinds.KNOWN) - {kinds.LINEAGE}, "the test store lacks a record kind"  # no LINEAGE
    done = agentfs_cli("upgrade", str(store))
    assert (done.returncode, done.stderr) == (0, "")
    counts = {kinds.NAMES[kind]: sum(1 for k, _ in expected if k == kind) for kind in kinds.KNOWN}
    assert done.stdout.splitlines() == [
        f"converted {counts['object']} objects, {counts['entry']} checkpoints, {counts['journal']} journal records, "
        f"{counts['retired']} retirement records, {counts['fork']} fork marker (1.5 MiB) into segments/",
        "dropped remotes/ (what was pushed to 1 format-1 remote: a cache, never read by format 2)",
        "set the config's format to 2 (the commit point)",
        "removed the format-1 files: objects/, runs/, forks/, locks/runs/, locks/pruned",
    ]
    assert_upgraded(store, expected)
    assert json.loads((store / "config").read_text()) == {**config, "format": 2}  # every other field kept
    fd = os.open(store / "locks" / "gc.lock", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)  # a format-2 process using the store does not stop the no-op
        again = agentfs_cli("upgrade", str(store))
    finally:
        os.close(fd)
    assert (again.returncode, again.stdout) == (0, f"{store} is a format-2 store: nothing to upgrade\n")


def test_dry_run_reports_and_changes_nothing(store: Path) -> None:
    before = tree(store)
    done = agentfs_cli("--store", str(store), "upgrade", "--dry-run", "--json")
    assert done.returncode == 0
    report = json.loads(done.stdout)
    assert report["converted"] == {
        kinds.NAMES[kind]: sum(1 for k, _ in expected_records(store) if k == kind) for kind in sorted(kinds.KNOWN - {kinds.LINEAGE})
    }
    assert (report["found_format"], report["damaged"], len(report["dropped_remotes"])) == (1, [], 1)
    assert tree(store) == before


def test_damaged_records_are_reported_and_skipped_and_the_rest_converted(store: Path) -> None:
    expected = expected_records(store)
    damaged_object = next((store / "objects").glob("*/*"))
    damaged_object.write_bytes(damaged_object.read_bytes()[:-1] + b"\0")
    damaged_entry = next((store / "runs" / "a" / "b" / "log").iterdir())
    damaged_entry.write_bytes(damaged_entry.read_bytes()[:20])  # torn
    damaged_journal = next((store / "runs" / "research" / "main" / "journal").iterdir())
    moved = store / "runs" / "a" / "journal"  # a record moved to another run: intact bytes at the wrong key
    moved.mkdir()
    shutil.copy(damaged_journal, moved / damaged_journal.name)
    done = agentfs_cli("upgrade", str(store))
    assert done.returncode == 1
    warnings = done.stderr.splitlines()
    assert len(warnings) == 3 and all(w.startswith("agentfs: warning: skipped damaged record: ") for w in warnings)
    for path in (damaged_object, damaged_entry, moved / damaged_journal.name):
        assert sum(str(path) in w for w in warnings) == 1, path
    assert "; skipped 3 damaged records" in done.stdout.splitlines()[0]
    for path in (damaged_object, damaged_entry):
        key = bytes.fromhex(path.parent.name + path.name) if path.parent.parent.name == "objects" else kinds.pair_key("a/b", path.name)
        del expected[(kinds.OBJECT if len(key) == 32 else kinds.ENTRY, key)]
    assert_upgraded(store, expected)


def test_a_store_in_use_is_refused_untouched(store: Path) -> None:
    before = tree(store)
    fd = os.open(store / "locks" / "gc.lock", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)  # what a format-1 writer holds around a commit
        done = agentfs_cli("upgrade", str(store))
    finally:
        os.close(fd)
    assert done.returncode == 4
    held = f"another process holds {store / 'locks' / 'gc.lock'}"
    assert done.stderr == f"agentfs: error: {store} is in use: {held}; stop every agentfs process using it, then upgrade\n"
    assert tree(store) == before


def test_not_a_store_and_another_format_are_errors(tmp_path: Path) -> None:
    none = tmp_path / "none"
    done = agentfs_cli("upgrade", str(none))
    assert (done.returncode, done.stderr) == (3, f"agentfs: error: no agentfs store at {none}: {none / 'config'} does not exist\n")
    (tmp_path / "config").write_text(json.dumps({"format": 3, "store_id": "x", "hash": "sha256"}))
    done = agentfs_cli("upgrade", str(tmp_path))
    message = f"agentfs: error: {tmp_path / 'config'} has format 3; agentfs upgrade converts format 1 to 2\n"
    assert (done.returncode, done.stderr) == (4, message)


@pytest.mark.parametrize(("point", "format_left"), [("batch", 1), ("remotes", 1), ("config", 2), ("removal", 2)])
def test_an_upgrade_killed_at_any_point_leaves_a_usable_store_and_a_rerun_finishes(store: Path, point: str, format_left: int) -> None:
    expected, original = expected_records(store), format1_files(store)
    killed = subprocess.run(
        [sys.executable, str(REPO / "tests" / "helpers" / "upgrade_killer.py"), point, str(store)], env=ENV, timeout=60, capture_output=True
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert read_format(store)[0] == format_left
    if format_left == 1:
        assert format1_files(store) == original  # the format-1 store is untouched: only read
        assert (store / "segments").is_dir()  # the stray segments a re-run discards
    else:
        found, problems = segment_records(store)
        assert not problems and not missing(expected, found)
    rerun = agentfs_cli("upgrade", str(store))
    assert (rerun.returncode, rerun.stderr) == (0, "")
    assert (
        rerun.stdout.splitlines()[0]
        == {
            "batch": "discarded segments/ left by an interrupted upgrade",
            "remotes": "discarded segments/ left by an interrupted upgrade",
            "config": "removed what an interrupted upgrade left of format 1: objects/, runs/, forks/, locks/runs/, locks/pruned",
            "removal": "removed what an interrupted upgrade left of format 1: runs/, forks/, locks/runs/, locks/pruned",
        }[point]
    )
    assert_upgraded(store, expected)


@pytest.mark.usefixtures("strace_installed")
def test_every_power_loss_state_of_an_upgrade_is_a_usable_store(tmp_path: Path) -> None:
    result = explore("tests.crashsim.workloads", "upgrade", tmp_path, check_upgrade, setup=True, max_cuts=None, samples=3)
    assert result.acks == 1 and result.states > 10, (result.acks, result.states)
    assert not result.findings, "\n".join(map(str, result.findings[:10]))


def test_the_upgrade_check_catches_a_planted_missing_sync(tmp_path: Path) -> None:
    """Without the fsync of segments/ after a new segment's entry, the commit point can outlive the segment.

    (A missing per-batch fdatasync is no hazard here: sealing fsyncs the segment before the commit point.)
    """
    result = explore("tests.crashsim.workloads", "upgrade", tmp_path, check_upgrade, setup=True, plant="segment-dir-fsync", max_cuts=None)
    assert result.lost(), f"the planted missing fsync went unnoticed in {result.states} states"


def test_the_json_comparison_names_a_run_that_differs(store: Path) -> None:
    """The comparison the next test relies on can fail: on the upgraded store, one more commit is named."""
    assert agentfs_cli("upgrade", str(store)).returncode == 0
    with agentfs.open(store) as opened:
        opened.run("a").commit({"level": "changed"})
        changed = opened.run("a")
        assert compare_with_json(opened, described()) == [f"a: ids {changed.ids()} head {changed.head_id()}"]


def test_the_upgraded_store_opens_with_everything_the_format1_store_held(store: Path) -> None:
    assert agentfs_cli("upgrade", str(store)).returncode == 0
    with agentfs.open(store) as opened:
        assert compare_with_json(opened, described()) == []
        assert opened.verify().problems == []
