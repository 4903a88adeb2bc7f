"""Reading a checkpoint's state: a long value is read on the caller's thread, every byte verified.

A value's chunks are small (chunking.SMALL): each is read, decompressed and hashed by the thread that
asked for the state, without a trip through the store's pool. A chunk's frame checksum is not computed
on that path because the chunk's sha256 covers every byte: a byte flipped anywhere in the frame on disk
still fails the read (or, in the checksum field alone, leaves the verified bytes sound).
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import pytest

import agentfs
from agentfs.engine.object_cache import ObjectCache
from agentfs.format import codec, kinds, refs
from agentfs.format import segment as fmt
from agentfs.serialization import encode_body
from tests.helpers import raw

MESSAGES = [{"role": "user" if i % 2 else "assistant", "content": f"message {i} " + "lorem ipsum " * 40} for i in range(400)]


def io_threads() -> set[threading.Thread]:
    return {thread for thread in threading.enumerate() if thread.name.startswith("agentfs-io")}


def first_chunk(root: Path, value: Any) -> bytes:
    """The id of the object that holds the start of `value`'s stored bytes (its tree's first chunk)."""
    body = encode_body(value)[2]
    for oid in raw.object_ids(root):
        data = codec.decode(raw.object_bytes(root, oid), oid, "test")
        if body.startswith(data):
            return oid
    raise AssertionError("no stored object starts the value")


def test_a_long_value_is_read_without_starting_the_pool(tmp_path: Path) -> None:
    root = tmp_path / ".agentfs"
    with agentfs.open(root) as store:
        cp = store.run("r").commit({"messages": MESSAGES})
        assert isinstance(cp.manifest.state["messages"].blob, refs.TreeRef), "the value is a chunk tree"
    before = io_threads()
    with agentfs.open(root) as store:
        assert store.run("r").latest().state == {"messages": MESSAGES}  # type: ignore[union-attr]
        assert io_threads() == before, "reading the value started the store's pool"


def test_a_byte_flipped_anywhere_in_a_chunks_frame_fails_the_read_or_reads_sound(tmp_path: Path) -> None:
    root = tmp_path / ".agentfs"
    with agentfs.open(root, durability="process") as store:
        cp = store.run("r").commit({"messages": MESSAGES})
        oid = first_chunk(root, MESSAGES)
        sound = store.engine.db.read(oid)
        location = store.engine.db.location(oid)
        assert location is not None
        path = root / "segments" / fmt.segment_name(location.segment_id)
        header = fmt.FRAME.size + fmt.KEY_LENGTH.size + kinds.OID_LENGTH
        checksum_field = range(4, 8)  # the frame: payload length u32, crc32 u32, kind u8
        positions = list(range(header + codec.HEADER_SIZE)) + list(range(header + codec.HEADER_SIZE, location.length, 61))
        outcomes: dict[str, list[int]] = {"sound": [], "refused": []}
        with open(path, "r+b") as segment:
            for position in positions:
                original = os.pread(segment.fileno(), 1, location.offset + position)
                os.pwrite(segment.fileno(), bytes([original[0] ^ 0xFF]), location.offset + position)
                try:
                    data = store.engine.db.read(oid)  # the store's read, beneath its checkpoint readers' cache
                    assert data == sound, f"a flip at byte {position} of the frame returned other bytes"
                    outcomes["sound"].append(position)
                except agentfs.IntegrityError:
                    outcomes["refused"].append(position)
                finally:
                    os.pwrite(segment.fileno(), original, location.offset + position)
        assert outcomes["sound"] == list(checksum_field), outcomes
        assert store.run("r").get(cp.id).value("messages") == MESSAGES
        assert store.verify().ok


def test_a_damaged_first_copy_is_passed_over_for_a_sound_one(tmp_path: Path) -> None:
    root = tmp_path / ".agentfs"
    with agentfs.open(root) as store:
        cp = store.run("r").commit({"messages": MESSAGES})
        oid = first_chunk(root, MESSAGES)
        sound = raw.corrupt_object(root, oid)
        with pytest.raises(agentfs.IntegrityError, match=oid.hex()):
            store.run("r").get(cp.id).value("messages")
        store.engine.db.install(oid, sound, "test")  # a second copy, as a repair from a remote appends
        assert store.run("r").get(cp.id).value("messages") == MESSAGES


def test_a_checkpoint_read_again_comes_from_the_cache_and_verify_still_reads_the_disk(tmp_path: Path) -> None:
    root = tmp_path / ".agentfs"
    state = {"messages": MESSAGES, "scratch": {f"k{i}": "v" * 40 for i in range(100)}}  # scratch: a packed object
    with agentfs.open(root) as store:
        cp = store.run("r").commit(state)
        assert store.run("r").get(cp.id).state == state
        objects = raw.object_ids(root)
        assert len(objects) > 10
        for oid in objects:
            raw.corrupt_object(root, oid)
        assert store.run("r").get(cp.id).state == state  # every object kept: none read from disk again
        report = store.verify()
        assert not report.ok and all(any(oid.hex() in str(problem) for problem in report.problems) for oid in objects)
    with agentfs.open(root) as fresh, pytest.raises(agentfs.IntegrityError):
        fresh.run("r").get(cp.id).state  # noqa: B018 (the property reads and verifies)


def value_chunks(store: agentfs.Store, ref: refs.TreeRef) -> list[bytes]:
    """The ids of the chunks of the tree `ref`, in order."""
    level = [ref.oid]
    for _ in range(ref.depth):
        level = [child for node in level for child, _size in refs.parse_node(store.engine.db.read(node), node, "test")]
    return level


def test_a_damaged_chunk_amid_a_value_read_together_is_refused_by_a_fresh_store(tmp_path: Path) -> None:
    """A value's small chunks are read together (BlobReader.SMALL_BATCH at a time) and verified each: one damaged
    amid them (a well-formed object of other bytes under its id) fails the read, naming it, as it does alone; the
    other chunks of the batch still read sound."""
    root = tmp_path / ".agentfs"
    with agentfs.open(root) as store:
        cp = store.run("r").commit({"messages": MESSAGES})
        ref = cp.manifest.state["messages"].blob
        assert isinstance(ref, refs.TreeRef)
        chunks = value_chunks(store, ref)
    assert len(chunks) > 10, "the value spans many chunks, read in one batch"
    damaged = chunks[len(chunks) // 2]
    sound = codec.decode(raw.object_bytes(root, damaged), damaged, "test")
    raw.set_object_bytes(root, damaged, codec.encode(bytes(reversed(sound))))  # well formed, decompresses: only its hash tells
    with agentfs.open(root) as fresh, pytest.raises(agentfs.IntegrityError, match=damaged.hex()):
        fresh.run("r").get(cp.id).state  # noqa: B018 (the property reads and verifies)
    with agentfs.open(root) as fresh:
        assert fresh.engine.db.read_first_copies(chunks) == [None if oid == damaged else fresh.engine.db.read(oid) for oid in chunks]


def test_the_cache_keeps_small_objects_up_to_its_capacity_dropping_the_least_recently_used() -> None:
    cache = ObjectCache(capacity=3_000, largest=2_000)
    reads: list[bytes] = []

    def read(oid: bytes) -> bytes:
        reads.append(oid)
        return oid * 1000  # 1,000 bytes per letter of the id

    for oid in [b"a", b"b", b"c", b"a", b"dddd", b"dddd", b"e"]:
        assert cache.get(oid, read) == oid * 1000
    assert reads == [b"a", b"b", b"c", b"dddd", b"dddd", b"e"], "a kept, dddd (4,000 bytes) larger than the cache keeps"
    assert cache.held_bytes() == 3_000
    reads.clear()
    for oid in [b"a", b"c", b"e", b"b"]:
        assert cache.get(oid, read) == oid * 1000
    assert reads == [b"b"], "a, used lately, was kept; b, the least recently used, was dropped for e"
