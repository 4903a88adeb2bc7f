"""The on-disk format (docs/FORMAT.md), read back from the raw segment files with struct, zlib, msgpack, zstandard and hashlib only."""

from __future__ import annotations

import hashlib
import json
import os
import random
import socket
import struct
import time
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import msgpack
import pytest
import zstandard

import agentfs
from tests.helpers.spec_manifest import CROCKFORD, manifest_map

ULID_CHARS = set("0123456789ABCDEFGHJKMNPQRSTVWXYZ")
INLINE, PACKED, LOOSE, TREE = 0, 1, 2, 3
PLAIN, LIST_BODY, MAP_BODY = 0, 1, 2


def decode_object_file(blob: bytes) -> tuple[int, bytes]:
    """(codec, uncompressed bytes) of an object file, by the documented layout."""
    assert blob[:4] == b"AFO\x01", blob[:5]
    codec = blob[4]
    assert codec in (0, 1), codec
    if codec == 0:
        return codec, blob[5:]
    params = zstandard.get_frame_parameters(blob[5:])
    assert params.content_size not in (0, zstandard.CONTENTSIZE_UNKNOWN) or len(blob) < 20  # content size recorded
    return codec, zstandard.ZstdDecompressor().decompressobj().decompress(blob[5:])


OBJECT, ENTRY = 16, 17  # record kinds
HEADER = struct.Struct(">8sHHQ16sI")
FRAME = struct.Struct(">IIB")


def segment_records(path: Path) -> list[tuple[int, bytes, bytes]]:
    """(kind, key, body) of every record of a segment file, by the documented layout; every frame checked."""
    data = path.read_bytes()
    magic, version, _slot, segment_id, _writer, crc = HEADER.unpack_from(data)
    assert magic == b"\x89AFSSEG\n" and version == 2 and zlib.crc32(data[: HEADER.size - 4]) == crc
    assert path.name == f"{segment_id:016x}.seg"
    records, position, open_batch = [], HEADER.size, None
    while position + FRAME.size <= len(data):
        length, crc, kind = FRAME.unpack_from(data, position)
        if (length, crc, kind) == (0, 0, 0):
            assert data[position:].strip(b"\0") == b"" and open_batch is None  # preallocated zeros end the data
            break
        payload = data[position + FRAME.size : position + FRAME.size + length]
        assert zlib.crc32(payload, zlib.crc32(struct.pack(">IB", length, kind))) == crc, f"{path} offset {position}"
        if kind == 1:  # BEGIN: batch magic, segment id, own offset, batch length, record count
            assert payload[:8] == b"\x89AFSBAT\n" and struct.unpack_from(">QQ", payload, 8) == (segment_id, position)
            open_batch = []
        elif kind == 2:  # END
            assert open_batch is not None
            records += open_batch
            open_batch = None
        elif kind == 3:  # FOOTER, then the trailer: a sealed segment
            assert open_batch is None and data[-24:-16] == b"\x89AFSEND\n"
            break
        else:
            assert kind >= 16 and open_batch is not None
            key_length = struct.unpack_from(">H", payload)[0]
            open_batch.append((kind, payload[2 : 2 + key_length], payload[2 + key_length :]))
        position += FRAME.size + length
    return records


def stored_records(root: Path) -> dict[tuple[int, bytes], bytes]:
    found: dict[tuple[int, bytes], bytes] = {}
    for path in sorted((root / "segments").glob("*.seg")):  # seal copies (*.seal) repeat a sealed segment's footer
        for kind, key, body in segment_records(path):
            found.setdefault((kind, key), body)
    return found


def read_object(root: Path, oid: bytes) -> bytes:
    _codec, data = decode_object_file(stored_records(root)[(OBJECT, oid)])
    assert hashlib.sha256(data).digest() == oid
    return data


def object_ids(root: Path) -> list[bytes]:
    return sorted(key for kind, key in stored_records(root) if kind == OBJECT)


@dataclass
class Entry:
    id: str
    manifest: dict[str, Any]
    pack: dict[bytes, bytes]


def read_entry(root: Path, run: str, checkpoint_id: str) -> Entry:
    """A version-2 entry, its format-2 manifest (an array) given back as a map of the documented field names, with
    the run and id of its key and the ids as text."""
    raw = stored_records(root)[(ENTRY, f"{run}\0{checkpoint_id}".encode())]
    assert raw[:4] == b"AFL\x02"
    body = raw[36:]
    assert hashlib.sha256(f"{run}\0{checkpoint_id}".encode() + body).digest() == raw[4:36]  # the key, then the body
    manifest_bytes, pack_list = msgpack.unpackb(body, raw=False)
    assert isinstance(manifest_bytes, bytes)
    manifest = manifest_map(msgpack.unpackb(manifest_bytes, raw=False, strict_map_key=False), run, checkpoint_id)
    refs = [ref for _format, _count, ref in manifest["state"][1].values()] + list(manifest["artifacts"].values())
    oids = sorted({ref[1] for ref in refs if ref[0] == PACKED and len(ref) == 3})  # its own packed refs', by oid
    assert len(pack_list) == len(oids)
    pack = {}
    for oid, blob in zip(oids, pack_list, strict=True):
        _codec, data = decode_object_file(blob)
        assert hashlib.sha256(data).digest() == oid
        pack[oid] = data
    return Entry(checkpoint_id, manifest, pack)


def entry_ids(root: Path, run: str) -> list[str]:
    prefix = f"{run}\0".encode()
    return sorted(key[len(prefix) :].decode() for kind, key in stored_records(root) if kind == ENTRY and key.startswith(prefix))


def blob_bytes(root: Path, ref: list[Any], entries: dict[tuple[str, str], Entry], home: tuple[str, str]) -> bytes:
    """The bytes a blob ref names, resolved from the raw files by the documented rules."""
    kind = ref[0]
    if kind == INLINE:
        assert len(ref[1]) <= 64
        return bytes(ref[1])
    if kind == PACKED:
        location = (ref[3], ref[4]) if len(ref) == 5 else home
        data = entries[location].pack[ref[1]]
    elif kind == LOOSE:
        data = read_object(root, ref[1])
    else:
        assert kind == TREE and len(ref) == 4
        data = b"".join(_walk(root, ref[1], ref[3]))
    assert len(data) == ref[2]
    return data


def _walk(root: Path, oid: bytes, depth: int) -> Iterator[bytes]:
    children = msgpack.unpackb(read_object(root, oid), raw=False)
    assert children and all(len(c) == 2 and len(c[0]) == 32 for c in children)
    for child, size in children:
        if depth == 1:
            data = read_object(root, child)
            assert len(data) == size
            yield data
        else:
            yield from _walk(root, child, depth - 1)


def decode_value(fmt: int, count: int, data: bytes) -> Any:
    if fmt == PLAIN:
        return msgpack.unpackb(data, raw=False, strict_map_key=False)
    items = _items(data)
    if fmt == LIST_BODY:
        assert len(items) == count
        return items
    assert fmt == MAP_BODY and len(items) == 2 * count
    return dict(zip(items[::2], items[1::2], strict=True))


def _items(data: bytes) -> list[Any]:
    unpacker = msgpack.Unpacker(raw=False, strict_map_key=False, max_buffer_size=0)
    unpacker.feed(data)
    return list(unpacker)


def ulid_ms(ulid: str) -> int:
    value = 0
    for ch in ulid:
        value = value * 32 + CROCKFORD.index(ch)
    return value >> 80


# --- config and layout ----------------------------------------------------------------------------------


def test_config_file(tmp_path: Path) -> None:
    root = tmp_path / ".agentfs"
    agentfs.open(root).close()
    config = json.loads((root / "config").read_bytes())
    assert config == {
        "format": 2,
        "store_id": config["store_id"],
        "hash": "sha256",
        "codec": "zstd-3",
        "chunking": {
            "algorithm": "fastcdc-2020",
            "small": {"min_size": 1024, "avg_size": 4096, "max_size": 16384},
            "large": {"min_size": 65536, "avg_size": 131072, "max_size": 786432},
            "large_value_over": 4194304,
        },
        "inline_max": 64,
        "pack_max": 16384,
    }
    assert len(config["store_id"]) == 26 and set(config["store_id"]) <= ULID_CHARS
    assert sorted(p.name for p in root.iterdir()) == ["config", "locks", "remotes", "segments", "tmp"]


# --- objects --------------------------------------------------------------------------------------------


@pytest.fixture
def big_store(tmp_path: Path) -> Iterator[tuple[Path, agentfs.Checkpoint, dict[str, bytes]]]:
    root = tmp_path / ".agentfs"
    rng = random.Random(5)
    words = ["".join(rng.choice("etaoinshrdlu") for _ in range(rng.randint(2, 8))) for _ in range(1000)]
    text = " ".join(rng.choice(words) for _ in range(200_000)).encode()
    artifacts = {"random.bin": rng.randbytes(1_200_000), "text.txt": text, "small.bin": rng.randbytes(20_000)}
    with agentfs.open(root) as store:
        cp = store.run("fmt").commit(
            {
                "messages": [{"role": "user", "text": text[i : i + 400].decode()} for i in range(0, 120_000, 400)],
                "step": 3,
                "packed": b"p" * 1000,
                "notes": text[:10_000].decode(),  # packed too: the entry's zstd parameters and level 1 compress it differently
            },
            artifacts=artifacts,
            metadata={"source": "loop"},
        )
    yield root, cp, artifacts


def test_object_files_are_named_by_the_sha256_of_their_uncompressed_bytes(
    big_store: tuple[Path, agentfs.Checkpoint, dict[str, bytes]],
) -> None:
    root, _cp, _artifacts = big_store
    records = stored_records(root)
    oids = object_ids(root)
    assert len(oids) > 10
    codecs = set()
    for oid in oids:
        codec, data = decode_object_file(records[(OBJECT, oid)])
        codecs.add(codec)
        assert hashlib.sha256(data).digest() == oid
        if codec == 1:
            assert len(records[(OBJECT, oid)]) < len(data)  # compression kept only where it pays
    assert codecs == {0, 1}


def test_incompressible_chunks_are_stored_raw_and_text_compressed(big_store: tuple[Path, agentfs.Checkpoint, dict[str, bytes]]) -> None:
    root, cp, _artifacts = big_store
    entry = read_entry(root, "fmt", cp.id)
    records = stored_records(root)
    for name, expected_codec in (("random.bin", 0), ("text.txt", 1)):
        ref = entry.manifest["artifacts"][name]
        assert ref[0] == TREE
        chunks = list(_leaf_oids(root, ref[1], ref[3]))
        assert len(chunks) > 2
        for oid in chunks:
            assert records[(OBJECT, oid)][4] == expected_codec, name


def test_small_objects_are_compressed_at_zstd_level_1_larger_ones_at_level_3_and_packed_ones_for_speed(
    big_store: tuple[Path, agentfs.Checkpoint, dict[str, bytes]],
) -> None:
    root, cp, _artifacts = big_store
    records = stored_records(root)
    _manifest, pack_list = msgpack.unpackb(records[(ENTRY, f"fmt\0{cp.id}".encode())][36:], raw=False)  # see read_entry
    # FORMAT.md, Object files: an object packed into an entry with level 1's parameters for 16 KiB, but a minimum
    # match of 6 bytes and a hash table of 2^13 entries; an object record at level 1 up to 16 KiB, else level 3
    in_entry = zstandard.ZstdCompressionParameters.from_level(1, source_size=16384, min_match=6, hash_log=13)
    compressors = {
        "in entry": zstandard.ZstdCompressor(compression_params=in_entry),
        "level 1": zstandard.ZstdCompressor(level=1),
        "level 3": zstandard.ZstdCompressor(level=3),
    }
    blobs = [(body, False) for (kind, _key), body in records.items() if kind == OBJECT] + [
        (blob, True) for blob in pack_list
    ]  # version 2: the objects alone
    used = set()
    for blob, packed in blobs:
        codec, data = decode_object_file(blob)
        if codec == 1:
            name = "in entry" if packed else "level 1" if len(data) <= 16384 else "level 3"
            assert blob[5:] == compressors[name].compress(data), f"{name}: {len(data)} bytes"
            used.add(name)
    assert used == {"in entry", "level 1", "level 3"}


def _leaf_oids(root: Path, oid: bytes, depth: int) -> Iterator[bytes]:
    for child, _size in msgpack.unpackb(read_object(root, oid), raw=False):
        if depth == 1:
            yield child
        else:
            yield from _leaf_oids(root, child, depth - 1)


def test_artifacts_and_state_reassemble_from_raw_files(big_store: tuple[Path, agentfs.Checkpoint, dict[str, bytes]]) -> None:
    root, cp, artifacts = big_store
    entry = read_entry(root, "fmt", cp.id)
    entries = {("fmt", cp.id): entry}
    got = {name: blob_bytes(root, ref, entries, ("fmt", cp.id)) for name, ref in entry.manifest["artifacts"].items()}
    assert got == artifacts
    kind, values = entry.manifest["state"]
    assert kind == "map"
    state = {key: decode_value(fmt, count, blob_bytes(root, ref, entries, ("fmt", cp.id))) for key, (fmt, count, ref) in values.items()}
    assert state == cp.state
    fmt, count, ref = values["messages"]
    assert fmt == LIST_BODY and count == 300 and ref[0] == TREE  # a list without its header, chunked
    assert values["step"] == [PLAIN, 1, [INLINE, msgpack.packb(3)]]
    assert values["packed"][2][0] == PACKED and values["packed"][2][1] in entry.pack
    assert msgpack.unpackb(entry.manifest["metadata"]) == {"source": "loop"}


def _documented_end(count: int, size: int, previous_size: int) -> bool:
    """docs/FORMAT.md, Blob references: a node ends after a child whose size, times 0x9E3779B97F4A7C15 mod 2^64,
    has its top 32 bits below 2^32/16 once the node has 4 children, or below 2^32/2 once it has 8, unless
    the child is as big as the one before it; or at 512 children."""
    mixed = ((size * 0x9E3779B97F4A7C15) % (1 << 64)) >> 32
    if count >= 512:
        return True
    if size == previous_size:
        return False
    return (count >= 4 and mixed < (1 << 32) // 16) or (count >= 8 and mixed < (1 << 32) // 2)


def test_tree_node_boundaries_follow_the_documented_rule(tmp_path: Path) -> None:
    root = tmp_path / ".agentfs"
    data = random.Random(1).randbytes(5_000_000)  # ~35 large chunks: several depth-1 nodes
    with agentfs.open(root, durability="process") as store:
        cp = store.run("r").commit({}, artifacts={"a": data})
    ref = read_entry(root, "r", cp.id).manifest["artifacts"]["a"]
    assert ref[0] == TREE and ref[3] >= 2
    level = [ref[1]]
    for _depth in range(ref[3], 0, -1):
        nodes = [msgpack.unpackb(read_object(root, oid), raw=False) for oid in level]
        sizes = [child[1] for children in nodes for child in children]
        previous = [-1, *sizes[:-1]]  # the child before each, across node ends
        start = 0
        for i, children in enumerate(nodes):
            ends = [_documented_end(j + 1, sizes[start + j], previous[start + j]) for j in range(len(children))]
            assert not any(ends[:-1]), f"a node went on past an end at child {ends.index(True)}"
            if i < len(nodes) - 1:  # every node but the last of its level ends where the rule says
                assert ends[-1]
            start += len(children)
        level = [child[0] for children in nodes for child in children]
    assert blob_bytes(root, ref, {}, ("r", cp.id)) == data


def test_equal_chunks_fill_nodes_to_512(tmp_path: Path) -> None:
    """A run of chunks of one size never ends a node: a repeated block, cut into 3,008-byte chunks (a size
    that ends a node past 4 children), still gives nodes of 512, not of 4 (MAX_DEPTH would be passed
    beyond 4^8 chunks)."""
    root = tmp_path / ".agentfs"
    block = random.Random(1).randbytes(3008)
    assert _documented_end(4, 3008, 0)
    with agentfs.open(root, durability="process") as store:
        cp = store.run("r").commit({"blob": block * 700})
    ref = read_entry(root, "r", cp.id).manifest["state"][1]["blob"][2]
    assert ref[0] == TREE and ref[3] == 2
    nodes = [msgpack.unpackb(read_object(root, child[0]), raw=False) for child in msgpack.unpackb(read_object(root, ref[1]), raw=False)]
    sizes = [child[1] for children in nodes for child in children]
    assert len(set(sizes[1:-1])) == 1  # the chunks between the first and the last are of one size
    assert [len(children) for children in nodes] == [512, len(sizes) - 512]


def test_objects_are_written_once(big_store: tuple[Path, agentfs.Checkpoint, dict[str, bytes]]) -> None:
    root, _cp, artifacts = big_store
    before = [key for kind, key, _body in _all_records(root) if kind == OBJECT]
    with agentfs.open(root) as store:
        store.run("fmt").commit({"again": True}, artifacts=artifacts)
    assert [key for kind, key, _body in _all_records(root) if kind == OBJECT] == before  # not one object record more


def _all_records(root: Path) -> list[tuple[int, bytes, bytes]]:
    return [record for path in sorted((root / "segments").glob("*.seg")) for record in segment_records(path)]


# --- log entries and manifests --------------------------------------------------------------------------


def test_log_entry_and_manifest_fields(tmp_path: Path) -> None:
    root = tmp_path / ".agentfs"
    before = time.time_ns()
    with agentfs.open(root) as store:
        run = store.run("team/agent-1")
        first = run.commit({"step": 1, "blob": b"b" * 5000}, metadata={"k": "v"}, artifacts={"r.md": b"# hi"})
        second = run.commit([1, 2, 3])
        forked = run.fork(second.id, "team/agent-2").latest()
        store_id = store.id
    after = time.time_ns()
    assert forked is not None
    ids = entry_ids(root, "team/agent-1")
    assert ids == [first.id, second.id]
    e1, e2 = (read_entry(root, "team/agent-1", i) for i in ids)
    for entry, cp, parent in ((e1, first, None), (e2, second, first.id)):
        m = entry.manifest
        assert m["format"] == 2 and m["run"] == "team/agent-1" and m["id"] == cp.id and m["parent"] == parent
        assert isinstance(m["created"], int) and before <= m["created"] <= after
        assert m["writer"] == {"store": store_id, "host": socket.gethostname(), "pid": os.getpid()}
        assert isinstance(m["metadata"], bytes)
        assert "forked_from" not in m
        assert abs(ulid_ms(cp.id) - m["created"] // 1_000_000) < 2000
    assert msgpack.unpackb(e1.manifest["metadata"]) == {"k": "v"}
    assert e1.manifest["state"][0] == "map" and sorted(e1.manifest["state"][1]) == ["blob", "step"]
    assert e1.manifest["artifacts"] == {"r.md": [INLINE, b"# hi"]}
    assert e2.manifest["state"] == ["value", {"": [LIST_BODY, 3, [INLINE, b"\x01\x02\x03"]]}]
    assert e2.manifest["artifacts"] == {}
    assert msgpack.unpackb(e2.manifest["metadata"]) == {}
    # the fork: a new run whose first entry points back at the source's data
    fork_entry = read_entry(root, "team/agent-2", entry_ids(root, "team/agent-2")[0])
    assert fork_entry.manifest["forked_from"] == ["team/agent-1", second.id]
    assert fork_entry.manifest["parent"] is None and fork_entry.manifest["run"] == "team/agent-2"
    assert fork_entry.manifest["state"] == e2.manifest["state"]


def test_unchanged_packed_value_is_borrowed_from_the_earlier_entry(tmp_path: Path) -> None:
    root = tmp_path / ".agentfs"
    shared = os.urandom(5000)
    with agentfs.open(root) as store:
        run = store.run("r")
        first = run.commit({"shared": shared, "i": 0})
        second = run.commit({"shared": shared, "i": 1})
    e1 = read_entry(root, "r", first.id)
    e2 = read_entry(root, "r", second.id)
    ref1 = e1.manifest["state"][1]["shared"][2]
    ref2 = e2.manifest["state"][1]["shared"][2]
    assert ref1[0] == PACKED and len(ref1) == 3 and ref1[1] in e1.pack
    assert ref2 == [PACKED, ref1[1], ref1[2], "r", first.id]
    assert e2.pack == {}
    entries = {("r", first.id): e1, ("r", second.id): e2}
    assert decode_value(PLAIN, 1, blob_bytes(root, ref2, entries, ("r", second.id))) == shared


def test_ids_are_increasing_ulids(tmp_path: Path) -> None:
    with agentfs.open(tmp_path / ".agentfs", durability="process") as store:
        run = store.run("r")
        ids = [run.commit({"i": i}).id for i in range(60)]
    assert all(len(i) == 26 and set(i) <= ULID_CHARS for i in ids)
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    now_ms = time.time_ns() // 1_000_000
    assert all(now_ms - 60_000 <= ulid_ms(i) <= now_ms + 1000 for i in ids)
    assert entry_ids(tmp_path / ".agentfs", "r") == ids


def test_locks_stay_and_tmp_is_empty(tmp_path: Path) -> None:
    root = tmp_path / ".agentfs"
    with agentfs.open(root) as store:
        store.run("a/b").commit({"x": os.urandom(50_000)}, artifacts={"f": os.urandom(300_000)})
        store.run("c").commit({"x": 1})
        locks = {p: p.stat().st_ino for p in (root / "locks").rglob("*") if p.is_file()}
        stripes = {f"{kind}-{n:02d}" for kind in ("run", "journal") for n in range(32)}
        assert {p.name for p in locks} == stripes | {"gc", "config", "segment-writer-00"}  # a fixed set, none per run
        assert list((root / "tmp").iterdir()) == []
        for i in range(3):
            store.run("a/b").commit({"x": os.urandom(50_000), "i": i})
            store.run("c").commit({"x": i})
        store.gc(grace=0)
        assert {p: p.stat().st_ino for p in (root / "locks").rglob("*") if p.is_file()} == locks  # none added, none replaced
        assert list((root / "tmp").iterdir()) == []
    assert list((root / "tmp").iterdir()) == []


def test_no_commit_leaves_partial_files(tmp_path: Path) -> None:
    """Every file in the store is config, a lock, or a segment of complete batches (then zeros, or a seal)."""
    root = tmp_path / ".agentfs"
    with agentfs.open(root) as store:
        for i in range(5):
            store.run(f"r{i % 2}").commit({"i": i, "x": os.urandom(20_000 * i)}, artifacts={"a": os.urandom(100_000 * i)})
    for path in root.rglob("*"):
        if not path.is_file():
            continue
        rel = path.relative_to(root).parts
        if rel[0] == "segments" and path.suffix == ".seal":  # a seal copy: beside the segment it proves whole
            assert path.with_suffix(".seg").is_file(), path
        elif rel[0] == "segments":
            for kind, _key, body in segment_records(path):
                if kind == OBJECT:
                    decode_object_file(body)
        else:
            assert rel[0] in ("config", "locks"), rel
    assert len(entry_ids(root, "r0")) == 3 and len(entry_ids(root, "r1")) == 2
