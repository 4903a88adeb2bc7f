"""A large artifact's commit is read and cut on the committing thread and hashed, compressed and appended on
the store's pool: what it stores is what one thread doing it chunk after chunk stores, also when segments
roll over under it; and a failure midway (a read of the file, an append on the pool) fails the commit
before the rest of the file is read, with no checkpoint, nothing of it appended after the error is raised,
and a store that verifies and commits the same file next.
"""

from __future__ import annotations

import errno
import io
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest

import agentfs
from agentfs.engine import segment_writer
from agentfs.engine.object_store import ObjectWriter
from agentfs.format import codec
from agentfs.objects import blobs
from tests.objects.test_artifact_pipeline import assert_stored_as_one_thread_would, mixed

MIB = 1 << 20


class FailingReads(io.RawIOBase):
    """A binary file whose reads fail (EIO) once `good` bytes have been read, as a failing disk's would."""

    def __init__(self, data: bytes, good: int) -> None:
        self.data = memoryview(data)
        self.good = good
        self.position = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self.position == len(self.data):
            return 0
        if self.position >= self.good:
            raise OSError(errno.EIO, "Input/output error")
        count = min(len(buffer), self.good - self.position)
        buffer[:count] = self.data[self.position : self.position + count]
        self.position += count
        return count


class Appends:
    """Counts the batches the store's object writer appends (ObjectStore.append), and when the last one was."""

    def __init__(self, store: agentfs.Store) -> None:
        self.append: Callable[[Sequence[Any], bool], Any] = store.engine.db.append
        self.count = 0
        self.lock = threading.Lock()
        store.engine.db.append = self  # type: ignore[method-assign]

    def __call__(self, records: Sequence[Any], sync: bool) -> Any:
        located = self.append(records, sync)
        with self.lock:
            self.count += 1
        return located


@pytest.fixture
def slow_jobs(monkeypatch: pytest.MonkeyPatch) -> None:
    """Small batches, blocks and jobs, and slow compression: the file is read little ahead of the jobs, batches
    are appended from the first jobs on, and jobs are queued or running when the commit fails."""
    monkeypatch.setattr(ObjectWriter, "FLUSH_BYTES", 128 << 10)
    monkeypatch.setattr(ObjectWriter, "MAX_GATHERED", 256 << 10)
    monkeypatch.setattr(blobs, "STREAM_BLOCK", 1 * MIB)
    monkeypatch.setattr(blobs, "STREAM_BLOCKS", 2)
    monkeypatch.setattr(blobs, "STREAM_GROUP", 256 << 10)
    encode = codec.encode

    def slow_encode(data: Any, *, in_entry: bool = False) -> bytes:
        time.sleep(0.002)
        return encode(data, in_entry=in_entry)

    monkeypatch.setattr(codec, "encode", slow_encode)


def assert_nothing_appended_after(appends: Appends) -> None:
    """The failed commit's jobs are over: no batch of it is appended later (the pool is given time to run on)."""
    count = appends.count
    time.sleep(0.5)
    assert appends.count == count, f"{appends.count - count} batches appended after the commit failed"


def assert_store_recovers(store: agentfs.Store, run: str, data: bytes) -> None:
    assert store.run(run).latest() is None, "the failed commit left a checkpoint"
    assert store.verify().ok
    ref = store.run(run).commit({"again": True}, artifacts={"a.bin": data}).artifacts["a.bin"].ref
    assert_stored_as_one_thread_would(store, ref, data)
    latest = store.run(run).latest()
    assert latest is not None and latest.artifacts["a.bin"].read_bytes() == data
    assert store.verify().ok


def test_a_read_error_midway_fails_the_commit_with_nothing_appended_after_it(store: agentfs.Store, slow_jobs: None) -> None:
    data = mixed(12 * MIB, seed=11)
    appends = Appends(store)
    source = FailingReads(data, good=5 * MIB)
    with pytest.raises(OSError, match="Input/output error"):
        store.run("failing").commit({}, artifacts={"a.bin": source})
    assert appends.count > 0, "no batch was appended before the error: the test shows nothing"
    assert_nothing_appended_after(appends)
    assert_store_recovers(store, "failing", data)


def test_an_append_failing_on_the_pool_stops_the_commit_before_the_file_is_read_through(
    store: agentfs.Store, slow_jobs: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = mixed(12 * MIB, seed=12)
    write_parts = segment_writer._write_parts
    calls = 0

    def disk_full_at_the_third(fd: int, parts: list[Any], length: int, offset: int) -> None:
        nonlocal calls
        calls += 1
        if calls == 3:
            raise OSError(errno.ENOSPC, "No space left on device")
        write_parts(fd, parts, length, offset)

    monkeypatch.setattr(segment_writer, "_write_parts", disk_full_at_the_third)
    appends = Appends(store)
    source = io.BufferedReader(FailingReads(data, good=len(data)))
    with pytest.raises(agentfs.AgentFSError, match="No space left on device"):
        store.run("full").commit({}, artifacts={"a.bin": source})
    assert source.raw.position < len(data) // 2, f"read {source.raw.position:,} bytes of the file after the append failed"  # type: ignore[attr-defined]
    assert_nothing_appended_after(appends)
    monkeypatch.setattr(segment_writer, "_write_parts", write_parts)
    assert_store_recovers(store, "full", data)


def test_segments_rolling_over_under_the_pool_store_what_one_thread_would(store: agentfs.Store, slow_jobs: None, tmp_path: Path) -> None:
    """A file read into two blocks, each read into again once its chunks are stored, while a segment's roll-over
    (a seal, its fsyncs) runs in one pool job and the others compress on: the chunks' ids and bytes are still
    those of one thread, and the store verifies."""
    store.run("first").commit({"n": 0})
    store.engine._segment_writer().segment_bytes = 2 * MIB
    segments_before = len(list((store.root / "segments").iterdir()))
    data = mixed(10 * MIB, seed=13)
    source = tmp_path / "a.bin"
    source.write_bytes(data)
    ref = store.run("rolls").commit({}, artifacts={"a.bin": source}).artifacts["a.bin"].ref
    assert len(list((store.root / "segments").iterdir())) >= segments_before + 4, "the segments did not roll over"
    assert_stored_as_one_thread_would(store, ref, data)
    assert store.verify().ok
