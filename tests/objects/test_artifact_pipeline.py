"""A large artifact is cut, hashed and compressed on the store's pool: what is stored must
be what one thread doing it chunk after chunk stores, also when several threads commit at once and
when appends of gathered objects overlap; reading back decompresses chunks ahead on the pool.

The expected chunks come from pyfastcdc's own stream chunker run directly on this thread, their ids
from hashlib and their stored bytes from the codec, one chunk after the other.
"""

from __future__ import annotations

import hashlib
import io
import random
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from pyfastcdc.cy import FastCDC

import agentfs
from agentfs.engine import object_store
from agentfs.engine.object_store import ObjectWriter
from agentfs.format import chunking, codec
from agentfs.format.refs import Ref, TreeRef
from agentfs.objects import blobs
from tests.helpers import raw

MIB = 1 << 20
WORDS = [b"alpha", b"beta", b"gamma", b"delta", b"artifact", b"chunk", b"segment", b"\n"]


def mixed(size: int, seed: int) -> bytes:
    """Blocks of 256 KiB, alternately random (stored raw) and text (zstd), like a real artifact's mix."""
    rng = random.Random(seed)
    blocks = []
    for n in range(size // (256 << 10)):
        if n % 2 == 0:
            blocks.append(rng.randbytes(256 << 10))
        else:
            blocks.append(b" ".join(rng.choice(WORDS) for _ in range(60_000))[: 256 << 10])
    return b"".join(blocks)


def expected_chunks(data: bytes) -> list[bytes]:
    params = chunking.LARGE
    chunker = FastCDC(params.avg_size, min_size=params.min_size, max_size=params.max_size)
    return [bytes(chunk.data) for chunk in chunker.cut_stream(io.BytesIO(data))]


def leaves(store: agentfs.Store, ref: Ref) -> list[bytes]:
    """The ids of the chunks of a chunked blob, in order, read from its stored tree."""
    assert isinstance(ref, TreeRef), f"expected a chunk tree, got {ref}"

    def walk(oid: bytes, depth: int) -> list[bytes]:
        children = store.engine.db.read_node(oid, "test")
        if depth == 1:
            return [child for child, _size in children]
        return [leaf for child, _size in children for leaf in walk(child, depth - 1)]

    return walk(ref.oid, ref.depth)


def assert_stored_as_one_thread_would(store: agentfs.Store, ref: Ref, data: bytes) -> None:
    chunks = expected_chunks(data)
    assert len(chunks) > 20, "the artifact should be many chunks"
    assert leaves(store, ref) == [hashlib.sha256(chunk).digest() for chunk in chunks]
    for chunk in chunks:
        assert raw.object_bytes(store, hashlib.sha256(chunk).digest()) == codec.encode(chunk)


@pytest.fixture
def small_batches(monkeypatch: pytest.MonkeyPatch) -> None:
    """Appends every few chunks, so pool threads meet an append under way many times per commit."""
    monkeypatch.setattr(ObjectWriter, "FLUSH_BYTES", 256 << 10)
    monkeypatch.setattr(ObjectWriter, "MAX_GATHERED", 512 << 10)


def test_a_streamed_artifact_stores_the_chunks_ids_and_bytes_of_one_thread(store: agentfs.Store, tmp_path: Path) -> None:
    data = mixed(8 * MIB, seed=1)
    source = tmp_path / "big.bin"
    source.write_bytes(data)
    run = store.run("big")
    by_path = run.commit({"n": 0}, artifacts={"big.bin": source})
    with open(source, "rb") as handle:
        by_stream = run.commit({"n": 1}, artifacts={"big.bin": handle})

    ref = by_path.artifacts["big.bin"].ref
    assert_stored_as_one_thread_would(store, ref, data)
    assert by_stream.artifacts["big.bin"].ref == ref
    assert by_path.artifacts["big.bin"].read_bytes() == data
    assert store.verify().ok


class ShortReads(io.RawIOBase):
    """A binary stream that hands out at most `most` bytes per read, as a pipe or a socket may."""

    def __init__(self, data: bytes, most: int) -> None:
        self.data = memoryview(data)
        self.most = most

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        count = min(len(buffer), self.most, len(self.data))
        buffer[:count] = self.data[:count]
        self.data = self.data[count:]
        return count


class ReadOnly:
    """A stream with read() and no readinto()."""

    def __init__(self, data: bytes) -> None:
        self.stream = io.BytesIO(data)

    def read(self, size: int = -1) -> bytes:
        return self.stream.read(size)


@pytest.mark.parametrize("block", [2 * MIB, 3 * MIB + 12345])
def test_a_stream_read_into_few_blocks_is_cut_and_stored_as_one_thread_would(
    store: agentfs.Store, small_batches: None, monkeypatch: pytest.MonkeyPatch, block: int
) -> None:
    """Blocks are read into again as soon as the pool has stored their chunks (2 here, so each is reused
    while the other's chunks are stored): a block overwritten early would store other bytes under a chunk's
    id (caught by the comparison and by verify). Cuts across a block's end are those of one pass."""
    monkeypatch.setattr(blobs, "STREAM_BLOCK", block)
    monkeypatch.setattr(blobs, "STREAM_BLOCKS", 2)
    monkeypatch.setattr(blobs, "STREAM_GROUP", 256 << 10)
    data = mixed(20 * MIB, seed=7) + mixed(MIB, seed=8)[:777_777]
    run = store.run("blocks")
    streams = {"short": ShortReads(data, 100_003), "read only": ReadOnly(data), "file": io.BufferedReader(ShortReads(data, 1 << 30))}
    refs = {name: run.commit({"n": name}, artifacts={"a.bin": stream}).artifacts["a.bin"] for name, stream in streams.items()}
    first = refs["short"]
    assert_stored_as_one_thread_would(store, first.ref, data)
    assert all(artifact.ref == first.ref for artifact in refs.values())
    assert first.read_bytes() == data
    assert store.verify().ok


def test_several_threads_commit_large_artifacts_at_once(store: agentfs.Store, small_batches: None) -> None:
    shared = mixed(2 * MIB, seed=99)  # in every artifact: the writers race to store the same chunks
    artifacts = {n: mixed(2 * MIB, seed=n) + shared + mixed(MIB, seed=n + 10) for n in range(4)}
    refs: dict[int, Ref] = {}
    errors: list[BaseException] = []
    start = threading.Barrier(len(artifacts))

    def commit(n: int) -> None:
        try:
            start.wait()
            refs[n] = store.run(f"writer-{n}").commit({"n": n}, artifacts={"a.bin": artifacts[n]}).artifacts["a.bin"].ref
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=commit, args=(n,)) for n in artifacts]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors, errors
    for n, data in artifacts.items():
        assert_stored_as_one_thread_would(store, refs[n], data)
        cp = store.run(f"writer-{n}").latest()
        assert cp is not None and cp.artifacts["a.bin"].read_bytes() == data
    assert store.verify().ok


def test_a_job_appends_after_leaving_its_place_on_the_cores_to_the_next(store: agentfs.Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """A stream's job hashes and compresses its chunks holding one of the writer's places on the cores, and appends
    what is gathered once it has given it back: with one place, the next job stores its chunks while the first
    one's append waits (as on a segment's roll-over, for fsyncs)."""
    monkeypatch.setattr(object_store, "CORES", 1)
    monkeypatch.setattr(ObjectWriter, "FLUSH_BYTES", 1)  # each job appends what it gathered
    appending, go_on = threading.Event(), threading.Event()
    append = store.engine.db.append

    def waiting_append(records: Any, sync: bool) -> Any:
        appending.set()
        assert go_on.wait(30)
        return append(records, sync)

    monkeypatch.setattr(store.engine.db, "append", waiting_append)
    writer = store.engine.object_writer()
    first, second = (memoryview(mixed(512 << 10, seed)) for seed in (12, 13))
    appended = writer.add_all_later([first], lambda: None)
    assert appending.wait(30)
    try:
        next_job = writer.add_all_later([second], lambda: None)
        assert next_job.result(timeout=5) == [hashlib.sha256(second).digest()]
    finally:
        go_on.set()
    assert appended.result(timeout=30) == [hashlib.sha256(first).digest()]
    assert writer.finish() == []  # the first job's append took the second's record too
    assert store.engine.db.read(hashlib.sha256(second).digest()) == second


def test_read_ahead_streams_in_order_and_a_stream_closed_early_leaves_the_store_usable(store: agentfs.Store) -> None:
    data = mixed(6 * MIB, seed=3)
    run = store.run("read")
    artifact = run.commit({}, artifacts={"a.bin": data}).artifacts["a.bin"]
    with artifact.open() as stream:
        assert stream.read(1000) == data[:1000]  # the chunks after it are being read ahead: dropped at close
    pieces = []
    with artifact.open() as stream:
        while piece := stream.read(300_001):
            pieces.append(piece)
    assert b"".join(pieces) == data
    assert run.commit({"after": True}, artifacts={"a.bin": data[::-1]}).artifacts["a.bin"].read_bytes() == data[::-1]


def test_a_stream_opened_before_the_store_was_closed_reads_on(tmp_path: Path) -> None:
    data = mixed(3 * MIB, seed=6)
    store = agentfs.open(tmp_path / "store")
    artifact = store.run("read").commit({}, artifacts={"a.bin": data}).artifacts["a.bin"]
    with artifact.open() as stream:
        head = stream.read(1000)
        store.close()  # shuts the pool down under the stream's read-ahead
        assert head + stream.read() == data


def test_a_corrupt_chunk_read_ahead_fails_the_read_where_it_lies(store: agentfs.Store) -> None:
    data = mixed(6 * MIB, seed=4)
    artifact = store.run("read").commit({}, artifacts={"a.bin": data}).artifacts["a.bin"]
    chunks = expected_chunks(data)
    damaged = len(chunks) // 2
    raw.corrupt_object(store, hashlib.sha256(chunks[damaged]).digest())
    got = bytearray()
    with pytest.raises(agentfs.IntegrityError), artifact.open() as stream:
        while piece := stream.read(MIB):
            got += piece
    before = sum(len(chunk) for chunk in chunks[:damaged])
    assert bytes(got) == data[: len(got)] and len(got) <= before  # nothing past the damaged chunk was delivered


COMMIT_UNDER_STRACE = """
import sys
from pathlib import Path
import agentfs
with agentfs.open(sys.argv[1]) as store:
    store.run("big").commit({}, artifacts={"big.bin": Path(sys.argv[2])})
"""


@pytest.mark.usefixtures("strace_installed")
def test_batches_appended_before_the_entry_are_sent_to_disk_before_its_fdatasync(tmp_path: Path) -> None:
    """Each batch of a large artifact's objects appended ahead of the entry is handed to the disk
    (sync_file_range) as it is appended, so the commit's one fdatasync has little left to wait for."""
    source = tmp_path / "big.bin"
    source.write_bytes(mixed(16 * MIB, seed=5))  # about 11 MiB stored: 2 batches at 4 MiB, then the entry's
    trace = tmp_path / "trace"
    command = ["strace", "-f", "-qq", "-e", "trace=sync_file_range,fdatasync", "-o", str(trace)]
    subprocess.run([*command, sys.executable, "-c", COMMIT_UNDER_STRACE, str(tmp_path / "store"), str(source)], check=True, timeout=60)
    calls = [line.split()[1].split("(")[0] for line in trace.read_text().splitlines()]
    assert calls.count("sync_file_range") >= 2, calls
    assert calls[-1] == "fdatasync" and calls.index("sync_file_range") < len(calls) - 1, calls


@pytest.mark.usefixtures("strace_installed")
def test_batches_on_disk_are_dropped_from_the_page_cache_two_batches_later(tmp_path: Path) -> None:
    """A large artifact does not leave its records in the page cache: each batch sent to disk is dropped
    (POSIX_FADV_DONTNEED) once CACHED_BATCHES more are appended, its range exactly that batch's."""
    source = tmp_path / "big.bin"
    source.write_bytes(mixed(32 * MIB, seed=9))  # about 22 MiB stored: 5 batches at 4 MiB before the entry's
    trace = tmp_path / "trace"
    command = ["strace", "-f", "-qq", "-e", "trace=sync_file_range,fadvise64", "-o", str(trace)]
    subprocess.run([*command, sys.executable, "-c", COMMIT_UNDER_STRACE, str(tmp_path / "store"), str(source)], check=True, timeout=60)
    sent, dropped = [], []
    for line in trace.read_text().splitlines():
        call, _, args = line.split(maxsplit=1)[1].partition("(")
        offset, length = (int(arg) for arg in args.split(", ")[1:3])
        (sent if call == "sync_file_range" else dropped).append((offset, length))
    assert len(sent) >= 4, sent
    assert dropped == sent[: len(sent) - ObjectWriter.CACHED_BATCHES], (sent, dropped)
