"""Damaged disks and shutdown: a truncated sealed segment, close during a
commit, a crash at a segment rollover, debris and foreign entries in segments/, `init` over a store whose
config was lost, `agentfs.open` of a file. Real stores, real threads, SIGKILLed processes, the CLI.
The disk-full cases are in tests/engine/test_disk_full.py."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import agentfs
from agentfs.engine.segment_writer import SegmentWriter
from agentfs.engine.segments import SealedSegment, open_indexed, segment_ids
from agentfs.format import segment as fmt
from tests.cli.test_cli import cli

pytestmark = pytest.mark.timeout(180)
REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
ARTIFACT = 600_000  # bytes per checkpoint: two checkpoints pass the size at which a clean close seals (SEAL_AT)


def segment_paths(root: Path) -> list[Path]:
    return [root / "segments" / fmt.segment_name(segment_id) for segment_id in segment_ids(root / "segments")]


def sealed_store(root: Path) -> list[str]:
    """A run of three checkpoints in one segment sealed by a clean close; their ids."""
    with agentfs.open(root) as store:
        run = store.run("r")
        ids = [run.commit({"step": n}, artifacts={"a.bin": os.urandom(ARTIFACT)}).id for n in range(3)]
    (segment,) = segment_paths(root)
    assert isinstance(open_indexed(segment), SealedSegment), "a clean close of a segment past SEAL_AT seals it"
    return ids


def cut(path: Path, size: int) -> None:
    os.truncate(path, size)


@pytest.mark.parametrize("keep", ["half", "all_but_one_byte"])
def test_a_truncated_sealed_segment_is_reported_by_name_with_what_it_lost_and_never_shortens_the_run(
    tmp_path: Path, keep: str, caplog: pytest.LogCaptureFixture
) -> None:
    root = tmp_path / ".agentfs"
    ids = sealed_store(root)
    (segment,) = segment_paths(root)
    size = segment.stat().st_size
    cut(segment, size // 2 if keep == "half" else size - 1)

    checked = cli("verify", store=root)
    assert checked.returncode == 1, checked.stdout + checked.stderr
    report = checked.stdout + checked.stderr
    assert str(segment) in report and f"sealed segment of {size} bytes" in report
    if keep == "half":
        assert f"r@{ids[2]}" in report  # the head lived in the lost half: named
    with agentfs.open(root) as store:
        run = store.run("r")
        assert store.engine.head("r") == ids[2]  # the run's head is still the checkpoint that was lost, not an older one
        following = run.commit({"step": 3})
        assert following.parent == ids[2]
    assert any(str(segment) in record.getMessage() for record in caplog.records)  # said at open, not only by verify


@pytest.mark.parametrize("protector", ["open", "verify"])
def test_a_segment_sealed_before_seal_copies_gets_one_so_a_later_truncation_is_reported(tmp_path: Path, protector: str) -> None:
    root = tmp_path / ".agentfs"
    ids = sealed_store(root)
    (segment,) = segment_paths(root)
    for copy in (root / "segments").glob("*.seal"):
        copy.unlink()  # as an agentfs from before seal copies left it
    if protector == "open":
        agentfs.open(root).close()
    else:
        assert cli("verify", store=root).returncode == 0
    assert segment.with_suffix(".seal").is_file(), f"{protector} left the sealed segment without a seal copy"
    size = segment.stat().st_size
    cut(segment, size // 2)

    checked = cli("verify", store=root)
    report = checked.stdout + checked.stderr
    assert checked.returncode == 1, report
    assert str(segment) in report and f"sealed segment of {size} bytes" in report and f"r@{ids[2]}" in report


def test_verify_repair_restores_a_truncated_sealed_segment_from_a_remote(tmp_path: Path) -> None:
    root = tmp_path / ".agentfs"
    url = (tmp_path / "remote").as_uri()
    ids = sealed_store(root)
    assert cli("sync", url, store=root).returncode == 0
    (segment,) = segment_paths(root)
    cut(segment, segment.stat().st_size // 2)

    repaired = cli("verify", "--repair", "--remote", url, store=root)
    assert repaired.returncode == 0, repaired.stdout + repaired.stderr
    assert f"damaged segment {segment}" in repaired.stderr
    assert cli("verify", store=root).returncode == 0
    with agentfs.open(root) as store:
        assert [checkpoint.state for checkpoint in store.run("r").history()][::-1] == [{"step": n} for n in range(3)]
        assert store.engine.head("r") == ids[2]


def test_a_truncated_sealed_segment_without_a_remote_copy_is_left_and_named(tmp_path: Path) -> None:
    root = tmp_path / ".agentfs"
    sealed_store(root)
    (segment,) = segment_paths(root)
    cut(segment, segment.stat().st_size // 2)
    empty = (tmp_path / "empty-remote").as_uri()
    with agentfs.open(tmp_path / "other") as other:
        other.run("elsewhere").commit({"n": 0})
    assert cli("sync", empty, store=tmp_path / "other").returncode == 0  # a remote that never held these records
    repaired = cli("verify", "--repair", "--remote", empty, store=root)
    assert repaired.returncode == 1 and f"{segment}: no intact copy" in repaired.stderr
    assert segment.exists() and segment.with_suffix(".seal").exists()  # its seal copy (FORMAT.md), kept with it


def committing(store: agentfs.Store, stop: threading.Event, errors: list[BaseException], done: list[str]) -> None:
    """Commit, each commit deduplicating against an older segment, until stopped or refused."""
    run = store.run("busy")
    blob = Path(store.root / "blob").read_bytes()
    while not stop.is_set():
        try:
            done.append(run.commit({"n": len(done)}, artifacts={"same.bin": blob, "new.bin": os.urandom(50_000)}).id)
        except BaseException as exc:
            errors.append(exc)
            return


def open_descriptors() -> set[str]:
    return {os.readlink(f"/proc/self/fd/{fd}") for fd in os.listdir("/proc/self/fd") if os.path.exists(f"/proc/self/fd/{fd}")}


def test_close_during_commits_neither_deadlocks_nor_raises_a_bare_error_and_closes_every_descriptor(tmp_path: Path) -> None:
    for attempt in range(6):
        root = tmp_path / f"s{attempt}"
        blob = os.urandom(2_000_000)
        with agentfs.open(root) as first:  # the deduplicated objects lie in an older, sealed segment
            first.run("old").commit({}, artifacts={"same.bin": blob})
        (root / "blob").write_bytes(blob)
        store = agentfs.open(root)
        stop, errors, done = threading.Event(), [], []
        worker = threading.Thread(target=committing, args=(store, stop, errors, done), daemon=True)
        worker.start()
        time.sleep(0.05 * attempt)
        closer = threading.Thread(target=store.close, daemon=True)
        closer.start()
        closer.join(timeout=30)
        assert not closer.is_alive(), "close() hung while another thread committed"
        stop.set()
        worker.join(timeout=30)
        assert not worker.is_alive()
        assert all(isinstance(error, agentfs.AgentFSError) for error in errors), errors
        assert not [path for path in open_descriptors() if path.startswith(str(root))], "close() left descriptors of the store open"
        with agentfs.open(root) as reopened:
            assert [checkpoint.id for checkpoint in reopened.run("busy").history()][::-1] == done  # every commit that returned


def test_close_from_inside_a_commit_thread_does_not_wait_for_itself(tmp_path: Path) -> None:
    store = agentfs.open(tmp_path / ".agentfs")
    run = store.run("r")
    run.commit({"n": 0})
    with store.engine.writing():  # as a commit holds it
        closer = threading.Thread(target=store.close, daemon=True)
        closer.start()
        closer.join(timeout=0.5)
        assert closer.is_alive(), "close() must wait for the write in flight"
    closer.join(timeout=30)
    assert not closer.is_alive()
    with pytest.raises(agentfs.AgentFSError, match="closed"):
        run.commit({"n": 1})


def test_a_closed_segment_writer_refuses_to_append_rather_than_write_without_its_slot(tmp_path: Path) -> None:
    writer = SegmentWriter(tmp_path / "segments", tmp_path / "locks")
    writer.append([fmt.Record(99, b"first", b"x")])
    writer.close()  # another thread of the store may still hold a reference to it
    with pytest.raises(agentfs.AgentFSError, match="closed"):
        writer.append([fmt.Record(99, b"second", b"y")])
    assert len(segment_ids(tmp_path / "segments")) == 1


ROLLOVER_CHILD = """
import os, signal, sys
from pathlib import Path
from agentfs.engine import segment_writer
from agentfs.format import segment as fmt
root = Path(sys.argv[1])
real_write_all = segment_writer._write_all
def write_all(fd, data, offset):
    if offset == 0 and data[:8] == fmt.SEGMENT_MAGIC and os.environ.get("ROLLED"):
        os.kill(os.getpid(), signal.SIGKILL)  # killed at the header write of the next segment
    real_write_all(fd, data, offset)
segment_writer._write_all = write_all
with segment_writer.SegmentWriter(root / "segments", root / "locks", segment_bytes=200_000) as writer:
    for number in range(100):
        writer.append([fmt.Record(99, b"k%d" % number, os.urandom(30_000))])  # a kind a reader skips
        print(number, flush=True)
        os.environ["ROLLED"] = "1"
"""


def test_a_writer_killed_at_a_rollover_header_write_leaves_no_segment_that_verify_calls_corrupt(tmp_path: Path) -> None:
    root = tmp_path / ".agentfs"
    agentfs.open(root).close()
    command = [sys.executable, "-c", ROLLOVER_CHILD, str(root)]
    child = subprocess.run(command, env=ENV, capture_output=True, text=True, timeout=60, check=False)
    assert child.returncode == -signal.SIGKILL, child.stderr
    acknowledged = [int(line) for line in child.stdout.split()]
    assert acknowledged  # killed at the rollover after these appends
    for path in (root / "segments").iterdir():
        assert path.stat().st_size >= fmt.HEADER.size, f"{path}: a segment in segments/ without its header"
    checked = cli("verify", store=root)
    assert checked.returncode == 0 and "segment header" not in checked.stdout + checked.stderr, checked.stdout + checked.stderr
    with agentfs.open(root) as store:
        store.run("after").commit({"ok": True})
    assert cli("verify", store=root).returncode == 0


def test_gc_removes_a_header_less_segment_an_older_agentfs_left_at_a_crash(tmp_path: Path) -> None:
    root = tmp_path / ".agentfs"
    with agentfs.open(root) as store:
        checkpoint = store.run("r").commit({"n": 1})
    debris = root / "segments" / fmt.segment_name(0x40)
    debris.write_bytes(b"")  # created in place, killed before its header was written
    assert cli("verify", store=root).returncode == 1
    with agentfs.open(root) as store:
        store.gc(grace=0)
        assert not debris.exists()
        assert store.verify().ok and store.run("r").latest().id == checkpoint.id


def test_a_directory_named_like_a_segment_is_reported_by_path_and_skipped(tmp_path: Path) -> None:
    root = tmp_path / ".agentfs"
    with agentfs.open(root) as store:
        checkpoint = store.run("r").commit({"n": 1})
    foreign = root / "segments" / fmt.segment_name(0xFF)
    foreign.mkdir()
    listed = cli("log", "r", store=root)
    assert listed.returncode == 0 and checkpoint.id in listed.stdout, listed.stderr
    checked = cli("verify", store=root)
    assert checked.returncode == 1 and str(foreign) in checked.stdout + checked.stderr and "Errno" not in checked.stdout + checked.stderr
    with agentfs.open(root) as store:
        assert store.run("r").commit({"n": 2}).parent == checkpoint.id


def test_init_refuses_a_directory_holding_segments_but_no_config(tmp_path: Path) -> None:
    root = tmp_path / ".agentfs"
    with agentfs.open(root) as store:
        store.run("r").commit({"n": 1})
    config = (root / "config").read_bytes()
    (root / "config").unlink()
    refused = cli("init", store=root)
    assert refused.returncode != 0 and "created" not in refused.stdout
    assert "holds segments but no config" in refused.stderr and "Restore" in refused.stderr
    assert not (root / "config").exists()
    (root / "config").write_bytes(config)  # the recovery it names
    assert cli("log", "r", store=root).returncode == 0


def test_opening_a_file_as_a_store_is_an_agentfs_error_naming_it(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("not a store")
    with pytest.raises(agentfs.AgentFSError, match=str(path)):
        agentfs.open(path)
    with pytest.raises(agentfs.AgentFSError, match=str(path)):
        agentfs.open(path / ".agentfs")
