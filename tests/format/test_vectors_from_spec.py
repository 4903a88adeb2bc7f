"""The format-2 test vectors (tests/vectors/format2/ and format2-entries2/) read from docs/FORMAT.md alone.

This module imports nothing from agentfs (nor does tests/helpers/spec_manifest.py, which it shares
with test_bytes_on_disk.py): it is a second reader of the format, written from the specification, so
a change of the bytes agentfs writes or of the spec's text that the other does not follow fails here.
It uses the standard library (zlib's CRC-32, sha256, json), msgpack and zstandard only. What the
vectors hold is described in tests/vectors/format2/README.md and, for the assertions, in vectors.json.
"""

from __future__ import annotations

import hashlib
import json
import struct
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgpack
import zstandard

from tests.helpers.spec_manifest import CROCKFORD, manifest_map

# the same store and remote written twice: with log entries of version 1 (format-1 manifests), and of version 2
VECTOR_SETS = tuple(Path(__file__).parents[1] / "vectors" / name for name in ("format2", "format2-entries2"))

HEADER_MAGIC, BATCH_MAGIC, TRAILER_MAGIC = b"\x89AFSSEG\n", b"\x89AFSBAT\n", b"\x89AFSEND\n"
HEADER_SIZE, TRAILER_SIZE, FRAME_HEAD = 40, 24, 9
BEGIN, END, FOOTER = 1, 2, 3
OBJECT, ENTRY, JOURNAL, RETIRED, FORK = 16, 17, 18, 19, 20
INLINE, PACKED, LOOSE, TREE = 0, 1, 2, 3


# -- frames and segments ("Format 2: segment files") ---------------------------------------------------


@dataclass(frozen=True)
class Frame:
    offset: int
    length: int  # the whole frame: 9 bytes of head and the payload
    kind: int
    payload: bytes


def read_frame(data: bytes, offset: int) -> Frame:
    """A frame at `offset`, its crc32 checked (it covers payload length u32, kind u8, payload, in that order)."""
    length, crc, kind = struct.unpack_from(">IIB", data, offset)
    payload = data[offset + FRAME_HEAD : offset + FRAME_HEAD + length]
    assert len(payload) == length, f"frame at {offset} runs past the end"
    assert zlib.crc32(struct.pack(">IB", length, kind) + payload) == crc, f"frame at {offset}: crc32 mismatch"
    return Frame(offset, FRAME_HEAD + length, kind, payload)


@dataclass(frozen=True)
class Header:
    version: int
    slot: int
    segment_id: int
    writer: bytes


def read_header(data: bytes) -> Header:
    assert data[:8] == HEADER_MAGIC
    version, slot, segment_id, writer, crc = struct.unpack_from(">HHQ16sI", data, 8)
    assert zlib.crc32(data[:36]) == crc, "segment header crc32"
    assert version == 2
    return Header(version, slot, segment_id, writer)


@dataclass(frozen=True)
class Record:
    kind: int
    key: bytes
    body: bytes
    offset: int  # of its frame
    length: int


def record_of(frame: Frame) -> Record:
    assert frame.kind >= 16, f"record frame at {frame.offset} has kind {frame.kind}"
    (key_length,) = struct.unpack_from(">H", frame.payload, 0)
    assert 2 + key_length <= len(frame.payload), "key inside the payload"
    return Record(frame.kind, frame.payload[2 : 2 + key_length], frame.payload[2 + key_length :], frame.offset, frame.length)


def scan(data: bytes, segment_id: int) -> list[Record]:
    """Every record of the intact batches after the header (no damage is expected in the vectors)."""
    records: list[Record] = []
    offset = HEADER_SIZE
    while offset < len(data):
        if data[offset : offset + FRAME_HEAD] == bytes(FRAME_HEAD):
            break  # zeros end the data
        begin = read_frame(data, offset)
        if begin.kind == FOOTER:
            break
        assert begin.kind == BEGIN, f"a batch at {offset} starts with kind {begin.kind}"
        magic, named_segment, named_offset, batch_length, count = struct.unpack(">8sQQII", begin.payload)
        assert (magic, named_segment, named_offset) == (BATCH_MAGIC, segment_id, offset)
        position = offset + begin.length
        for _ in range(count):
            frame = read_frame(data, position)
            records.append(record_of(frame))
            position += frame.length
        end = read_frame(data, position)
        assert end.kind == END and struct.unpack(">QI", end.payload) == (offset, count)
        position += end.length
        assert position - offset == batch_length, "the batch length covers BEGIN to END"
        offset = position
    return records


@dataclass(frozen=True)
class Trailer:
    footer_offset: int
    footer_length: int


def read_trailer(data: bytes, size: int) -> Trailer | None:
    """The trailer ending `data` if it proves a file of `size` bytes whole: magic and crc32 hold, footer offset + length + 24 = size."""
    tail = data[-TRAILER_SIZE:]
    if len(tail) < TRAILER_SIZE or tail[:8] != TRAILER_MAGIC:
        return None
    footer_offset, footer_length, crc = struct.unpack_from(">QII", tail, 8)
    if zlib.crc32(tail[:20]) != crc or footer_offset + footer_length + TRAILER_SIZE != size:
        return None
    return Trailer(footer_offset, footer_length)


@dataclass(frozen=True)
class Row:
    kind: int
    key: bytes
    offset: int
    length: int


def read_footer(payload: bytes, segment_id: int, footer_offset: int) -> list[Row]:
    """Every row of a footer's sections ("Footer"), checked as a reader that decodes every row must."""
    named_segment, object_count, section_count, other_count = struct.unpack_from(">QIII", payload, 0)
    assert named_segment == segment_id
    rows: list[Row] = []
    position = 20
    object_rows = []
    for _ in range(object_count):
        oid, offset, length = struct.unpack_from(">32sQI", payload, position)
        object_rows.append(Row(OBJECT, oid, offset, length))
        position += 44
    assert object_rows == sorted(object_rows, key=lambda row: (row.key, row.offset.to_bytes(8, "big")))
    rows += object_rows
    sections: list[tuple[int, bytes, int]] = []
    for _ in range(section_count):
        kind, name_length, row_count = struct.unpack_from(">BHI", payload, position)
        position += 7
        name = payload[position : position + name_length]
        position += name_length
        assert kind in (ENTRY, JOURNAL, RETIRED) and row_count >= 1
        assert not sections or (sections[-1][0], sections[-1][1]) < (kind, name), "run sections sorted, each once"
        sections.append((kind, name, row_count))
    for kind, name, row_count in sections:
        section = []
        for _ in range(row_count):
            record_id, offset, length = struct.unpack_from(">26sQI", payload, position)
            check_id(record_id.decode("ascii"))
            section.append(Row(kind, name + b"\0" + record_id, offset, length))
            position += 38
        assert section == sorted(section, key=lambda row: (row.key, row.offset.to_bytes(8, "big")))
        rows += section
    for _ in range(other_count):
        kind, key_length, offset, length = struct.unpack_from(">BHQI", payload, position)
        position += 15
        assert kind >= 16
        rows.append(Row(kind, payload[position : position + key_length], offset, length))
        position += key_length
    assert position == len(payload), "the sections end exactly at the end of the payload"
    for row in rows:
        assert row.offset >= HEADER_SIZE and row.offset + row.length <= footer_offset, "a row lies between header and footer"
    return rows


@dataclass(frozen=True)
class Sealed:
    rows: list[Row]
    footer_and_trailer: bytes


def read_seal(data: bytes, segment_id: int) -> Sealed | None:
    trailer = read_trailer(data, len(data)) if len(data) >= HEADER_SIZE + TRAILER_SIZE else None
    if trailer is None:
        return None
    frame = read_frame(data, trailer.footer_offset)
    assert frame.kind == FOOTER and frame.length == trailer.footer_length
    return Sealed(read_footer(frame.payload, segment_id, trailer.footer_offset), data[trailer.footer_offset :])


def rows_of(records: list[Record]) -> list[Row]:
    return [Row(r.kind, r.key, r.offset, r.length) for r in records]


# -- names and ids ------------------------------------------------------------------------------------


def check_id(text: str) -> str:
    assert len(text) == 26 and all(c in CROCKFORD for c in text) and text[0] in "01234567", f"{text!r} is not a ULID"
    return text


def split_run_key(key: bytes) -> tuple[str, str]:
    run, _, record_id = key.partition(b"\0")
    name = run.decode()
    for segment in name.split("/"):
        assert segment not in ("", ".", "..", "log") and len(segment) <= 128
        assert all(c.isascii() and (c.isalnum() or c in "._-") for c in segment)
    return name, check_id(record_id.decode("ascii"))


def ulid_bytes(text: str) -> bytes:
    """A ULID's 128 bits (its 26 Crockford digits, big-endian), as segment and pack headers hold it."""
    return sum(CROCKFORD.index(c) << (5 * (25 - i)) for i, c in enumerate(check_id(text))).to_bytes(16, "big")


def inverted(name: str) -> str:
    """A head key's name back to the id (each Crockford digit at position i <-> the one at 31 - i)."""
    return "".join(CROCKFORD[31 - CROCKFORD.index(c)] for c in name)


# -- records: objects, sealed records, manifests, refs ----------------------------------------------------


def object_bytes(blob: bytes, oid: bytes) -> bytes:
    """An object file's uncompressed bytes ("Object files"), re-hashed against its oid."""
    assert blob[:3] == b"AFO" and blob[3] == 1
    codec, payload = blob[4], blob[5:]
    if codec == 0:
        data = payload
    else:
        assert codec == 1
        assert zstandard.frame_content_size(payload) <= 1 << 20, "content size recorded, at most 1 MiB"
        data = zstandard.ZstdDecompressor().decompress(payload)
    assert hashlib.sha256(data).digest() == oid, f"object {oid.hex()}: sha256 mismatch"
    return data


def sealed_body(blob: bytes, magic: bytes) -> bytes:
    """A sealed record's body: magic, version 1, sha256 of the body, body."""
    assert blob[:3] == magic and blob[3] == 1
    body = blob[36:]
    assert hashlib.sha256(body).digest() == blob[4:36], f"{magic!r} record: sha256 of the body"
    return body


def unpack(data: bytes) -> Any:
    def ext(code: int, payload: bytes) -> Any:
        assert code == 1, f"the vectors use only ext 1 (tuple), found {code}"
        return tuple(unpack(payload))

    return msgpack.unpackb(data, raw=False, strict_map_key=False, ext_hook=ext)


@dataclass
class Records:
    """Every record of a store or a remote, by kind and key; copies of one key must hold the same body."""

    bodies: dict[tuple[int, bytes], bytes] = field(default_factory=dict)

    def add(self, record: Record) -> None:
        known = self.bodies.setdefault((record.kind, record.key), record.body)
        assert known == record.body, f"two copies of kind {record.kind} key {record.key!r} differ"

    def keys(self, kind: int) -> list[bytes]:
        return sorted(key for k, key in self.bodies if k == kind)

    def entry(self, run: str, checkpoint_id: str) -> Entry:
        """A log entry ("Log entries"), its manifest ("Manifest") as a map of format 1's field names."""
        key = run.encode() + b"\0" + checkpoint_id.encode()
        data = self.bodies[ENTRY, key]
        if data[3] == 1:  # written before manifest format 2
            manifest_bytes, packed = msgpack.unpackb(sealed_body(data, b"AFL"), raw=False)
            manifest = unpack(manifest_bytes)
            assert manifest["format"] == 1 and (manifest["run"], manifest["id"]) == (run, checkpoint_id), "the entry names its key"
            return Entry(manifest, {oid: object_bytes(blob, oid) for oid, blob in packed})
        assert data[:4] == b"AFL\x02" and hashlib.sha256(key + data[36:]).digest() == data[4:36], "sha256 of the key and body"
        manifest_bytes, blobs = msgpack.unpackb(data[36:], raw=False)
        manifest = manifest_map(unpack(manifest_bytes), run, checkpoint_id)
        refs = [ref for _format, _count, ref in manifest["state"][1].values()] + list(manifest["artifacts"].values())
        own = sorted({ref[1] for ref in refs if ref[0] == PACKED and (len(ref) == 3 or (ref[3], ref[4]) == (run, checkpoint_id))})
        assert len(blobs) == len(own), "one packed object per oid its own PACKED refs name"
        return Entry(manifest, {oid: object_bytes(blob, oid) for oid, blob in zip(own, blobs, strict=True)})


@dataclass(frozen=True)
class Entry:
    manifest: dict[str, Any]
    packed: dict[bytes, bytes]


def blob(records: Records, entry: Entry, ref: list[Any]) -> bytes:
    """The bytes a blob reference points at ("Blob references")."""
    kind = ref[0]
    if kind == INLINE:
        assert len(ref[1]) <= 64
        return bytes(ref[1])
    oid, size = ref[1], ref[2]
    if kind == PACKED:
        source = records.entry(ref[3], ref[4]) if len(ref) == 5 else entry  # packed in another log entry, or this one
        data = source.packed[oid]
    elif kind == LOOSE:
        data = object_bytes(records.bodies[OBJECT, oid], oid)
    else:
        assert kind == TREE and len(ref) == 4
        data = tree(records, oid, size, ref[3])
    assert len(data) == size, f"blob {oid.hex()}: {len(data)} bytes, ref says {size}"
    return data


def tree(records: Records, oid: bytes, size: int, depth: int, levels: list[int] | None = None) -> bytes:
    children = msgpack.unpackb(object_bytes(records.bodies[OBJECT, oid], oid), raw=False)
    assert 1 <= len(children) <= 512
    assert sum(child_size for _, child_size in children) == size, "a node's children add up to its size"
    if levels is not None:
        levels.append(depth)
    parts = []
    for child, child_size in children:
        if depth == 1:
            chunk = object_bytes(records.bodies[OBJECT, child], child)
            assert len(chunk) == child_size
            parts.append(chunk)
        else:
            parts.append(tree(records, child, child_size, depth - 1, levels))
    return b"".join(parts)


def value(records: Records, entry: Entry, value_ref: list[Any]) -> tuple[int, int, bytes]:
    """A value ref [format, count, blob ref] as (format, count, stored bytes)."""
    fmt, count, ref = value_ref
    return fmt, count, blob(records, entry, ref)


def decoded(fmt: int, count: int, data: bytes) -> Any:
    if fmt == 0:
        return unpack(data)
    if fmt == 1:
        return unpack(array_header(count) + data)
    assert fmt == 2
    return unpack(map_header(count) + data)


def array_header(count: int) -> bytes:
    return (
        bytes([0x90 | count])
        if count < 16
        else (b"\xdc" + struct.pack(">H", count) if count < 1 << 16 else b"\xdd" + struct.pack(">I", count))
    )


def map_header(count: int) -> bytes:
    return (
        bytes([0x80 | count])
        if count < 16
        else (b"\xde" + struct.pack(">H", count) if count < 1 << 16 else b"\xdf" + struct.pack(">I", count))
    )


# -- the store and the remote ---------------------------------------------------------------------------


def expected(vectors: Path) -> dict[str, Any]:
    return json.loads((vectors / "vectors.json").read_text())


def read_store(vectors: Path) -> tuple[Records, list[str]]:
    """The store's records, from every segment; also which segments were sealed."""
    config = json.loads((vectors / "store" / "config").read_text())
    assert (config["format"], config["hash"], config["inline_max"], config["pack_max"]) == (2, "sha256", 64, 16384)
    records, sealed = Records(), []
    for path in sorted((vectors / "store" / "segments").glob("*.seg")):
        data = path.read_bytes()
        header = read_header(data)
        assert f"{header.segment_id:016x}" == path.stem, "the header names the file's segment id"
        scanned = scan(data, header.segment_id)
        seal = read_seal(data, header.segment_id)
        if seal is not None:
            sealed.append(path.name)
            key = lambda row: (row.kind, row.key, row.offset)  # noqa: E731
            assert sorted(seal.rows, key=key) == sorted(rows_of(scanned), key=key), "the footer lists every record"
            copy = path.with_suffix(".seal").read_bytes()  # seal copy: header | footer frame | trailer
            assert copy == data[:HEADER_SIZE] + seal.footer_and_trailer
        for record in scanned:
            records.add(record)
    return records, sealed


def read_remote(vectors: Path) -> tuple[Records, dict[str, tuple[str, list[str]]]]:
    """The remote's records, from the packs its indexes name; and each run's head key (id, pack hint)."""
    config = json.loads((vectors / "remote" / "config").read_text())
    assert config["format"] == 2 and "store_id" not in config and "retention" not in config
    records = Records()
    for index_path in sorted((vectors / "remote" / "packs").glob("*.idx")):
        index = index_path.read_bytes()
        pack = index_path.with_suffix(".pack").read_bytes()
        # the index alone is the footer frame and the trailer: its offsets are the pack's
        trailer = read_trailer(index, len(pack))
        assert trailer is not None and trailer.footer_offset + len(index) == len(pack), "footer offset + index length = the pack's size"
        assert trailer.footer_length + TRAILER_SIZE == len(index)
        footer_offset, footer_length = trailer.footer_offset, trailer.footer_length
        assert pack.endswith(index), "the index is the pack's last bytes"
        header = read_header(pack)
        assert f"{header.segment_id:016x}" == index_path.stem, "the pack id is its segment id"
        assert (header.slot, header.writer) == (0, ulid_bytes(expected(vectors)["store_id"])), "a pack's writer: the pushing store, slot 0"
        frame = read_frame(index, 0)
        assert frame.kind == FOOTER and frame.length == footer_length
        rows = read_footer(frame.payload, header.segment_id, footer_offset)
        scanned = scan(pack, header.segment_id)
        assert sorted(rows_of(scanned), key=repr) == sorted(rows, key=repr)
        for row in rows:  # read by the index's locations, as a remote reader's ranged GETs do
            record = record_of(read_frame(pack, row.offset))
            assert (record.kind, record.key, record.length) == (row.kind, row.key, row.length)
            records.add(record)
    heads = {}
    for directory in sorted((vectors / "remote" / "heads").iterdir()):
        names = sorted(p.name for p in directory.iterdir())
        head = json.loads((directory / names[0]).read_text())  # the first name ascending is the greatest id
        assert head["format"] == 2 and head["id"] == inverted(names[0])
        assert hashlib.sha256(head["run"].encode()).hexdigest() == directory.name
        heads[head["run"]] = (head["id"], head["packs"])
    return records, heads


def retired(records: Records) -> dict[str, list[str]]:
    """Each run's checkpoints that its RETIRED records name: hidden from every reader."""
    hidden: dict[str, list[str]] = {}
    for key in records.keys(RETIRED):
        run, record_id = split_run_key(key)
        body = unpack(sealed_body(records.bodies[RETIRED, key], b"AFR"))
        assert body["format"] == 1 and (body["run"], body["id"]) == (run, record_id)
        hidden.setdefault(run, []).extend(check_id(checkpoint_id) for checkpoint_id in body["checkpoints"])
    return {run: sorted(ids) for run, ids in hidden.items()}


def checkpoints(records: Records, store_id: str) -> dict[str, dict[str, Any]]:
    """Every entry not retired, reassembled: run -> id -> what vectors.json says of it (written by store `store_id`)."""
    runs: dict[str, dict[str, Any]] = {}
    hidden = retired(records)
    for key in records.keys(ENTRY):
        run, checkpoint_id = split_run_key(key)
        if checkpoint_id in hidden.get(run, []):
            continue
        entry = records.entry(run, checkpoint_id)
        manifest = entry.manifest
        assert isinstance(manifest["created"], int) and manifest["writer"] == {
            "store": store_id,
            "host": "vectors-host",
            "pid": 4242,
        }
        shape, state_refs = manifest["state"]
        assert shape == "map"
        state = {}
        for name, value_ref in state_refs.items():
            fmt, count, data = value(records, entry, value_ref)
            state[name] = described(fmt, count, data)
        artifacts = {}
        for name, ref in manifest["artifacts"].items():
            data = blob(records, entry, ref)
            artifacts[name] = {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
        runs.setdefault(run, {})[checkpoint_id] = {
            "parent": manifest["parent"],
            "forked_from": list(manifest["forked_from"]) if "forked_from" in manifest else None,
            "metadata": unpack(manifest["metadata"]),  # bin: msgpack bytes of a dict ({} when none was given)
            "state": state,
            "artifacts": artifacts,
        }
    return runs


def described(fmt: int, count: int, data: bytes) -> dict[str, Any]:
    """A value as vectors.json describes it (large lists by the sha256 and length of their stored bytes)."""
    loaded = decoded(fmt, count, data)
    if isinstance(loaded, tuple):
        return {"format": fmt, "ext": 1, "items": list(loaded)}
    if fmt == 1 and len(data) > 16384:
        return {"format": 1, "count": count, "sha256": hashlib.sha256(data).hexdigest(), "size": len(data), "first": loaded[0]}
    return {"format": fmt, "value": loaded}


def journal(records: Records) -> dict[str, list[dict[str, Any]]]:
    """Each run's calls: a key's state is that of its latest start, ok when an ok record names it."""
    calls: dict[str, dict[str, dict[str, Any]]] = {}
    bodies = []
    for key in records.keys(JOURNAL):
        run, record_id = split_run_key(key)
        body = unpack(sealed_body(records.bodies[JOURNAL, key], b"AFJ"))
        assert body["format"] == 1 and (body["run"], body["id"]) == (run, record_id)
        bodies.append(body)
    for body in sorted(bodies, key=lambda b: b["id"]):
        if body["kind"] == "start":
            assert body["call"] == body["id"]
            calls.setdefault(body["run"], {})[body["call"]] = {"key": body["key"], "status": "in flight", "result": None}
        else:
            call = calls[body["run"]][body["call"]]
            call["status"] = body["kind"]
            call["result"] = unpack(body["result"]) if body["kind"] == "ok" else None
    return {run: list(by_call.values()) for run, by_call in calls.items()}


# -- the tests ---------------------------------------------------------------------------------------------


def test_the_store_holds_the_described_checkpoints() -> None:
    for vectors in VECTOR_SETS:
        records, sealed = read_store(vectors)
        assert sealed, "the vectors hold a sealed segment (its footer and seal copy are read)"
        codecs = {body[4] for (kind, _), body in records.bodies.items() if kind == OBJECT}
        assert codecs == {0, 1}, "objects of both codecs, raw and zstd, are read"
        runs = expected(vectors)["runs"]
        assert retired(records) == expected(vectors)["retired"]
        for run, ids in expected(vectors)["retired"].items():  # a retired entry stays in its segment until compaction
            assert all(records.bodies.get((ENTRY, f"{run}\0{checkpoint_id}".encode())) for checkpoint_id in ids)
        found = checkpoints(records, expected(vectors)["store_id"])
        assert found == {run: described_run["checkpoints"] for run, described_run in runs.items()}
        for run, described_run in runs.items():
            assert max(found[run]) == described_run["head"], "the head of a run is its greatest id"


def test_the_store_holds_the_described_journal_and_fork() -> None:
    for vectors in VECTOR_SETS:
        records, _ = read_store(vectors)
        runs = expected(vectors)["runs"]
        assert journal(records) == {run: r["journal"] for run, r in runs.items() if r["journal"]}
        forks = [tuple(part.decode() for part in key.split(b"\0")) for key in records.keys(FORK)]
        assert forks == [
            (r["checkpoints"][r["ids"][0]]["forked_from"][0], run)
            for run, r in runs.items()
            if r["checkpoints"][r["ids"][0]]["forked_from"]
        ]
        assert all(records.bodies[FORK, key] == b"" for key in records.keys(FORK))


def test_the_big_value_is_a_tree_of_two_levels_of_nodes() -> None:
    for vectors in VECTOR_SETS:
        records, _ = read_store(vectors)
        trees = []
        for key in records.keys(ENTRY):
            entry = records.entry(*split_run_key(key))
            trees += [ref for _fmt, _count, ref in entry.manifest["state"][1].values() if ref[0] == TREE]
        assert trees, f"{vectors.name}: no state value is a tree"
        levels: list[int] = []
        tree(records, trees[0][1], trees[0][2], trees[0][3], levels)
        assert trees[0][3] >= 2 and levels.count(1) >= 2, f"depth {trees[0][3]}, {levels.count(1)} nodes of chunks"


def test_each_set_holds_log_entries_of_its_version() -> None:
    for vectors, version in zip(VECTOR_SETS, (1, 2), strict=True):
        records, _ = read_store(vectors)
        assert {records.bodies[ENTRY, key][3] for key in records.keys(ENTRY)} == {version}, vectors.name


def test_the_remote_holds_the_same_checkpoints_and_heads() -> None:
    for vectors in VECTOR_SETS:
        store_records, _ = read_store(vectors)
        records, heads = read_remote(vectors)
        runs = expected(vectors)["runs"]
        assert {run: head for run, (head, _) in heads.items()} == {run: r["head"] for run, r in runs.items()}
        for run, (_, packs) in heads.items():
            assert all((vectors / "remote" / "packs" / f"{pack}.idx").exists() for pack in packs), f"head of {run} hints at an indexed pack"
        assert checkpoints(records, expected(vectors)["store_id"]) == {run: r["checkpoints"] for run, r in runs.items()}
        assert retired(records) == expected(vectors)["retired"]
        for run, ids in expected(vectors)["retired"].items():  # also under retired/<sha256(run)>/<id>, byte-identical
            directory = vectors / "remote" / "retired" / hashlib.sha256(run.encode()).hexdigest()
            assert sorted(p.name for p in directory.iterdir()) == [
                split_run_key(k)[1] for k in records.keys(RETIRED) if split_run_key(k)[0] == run
            ]
            for path in directory.iterdir():
                assert path.read_bytes() == records.bodies[RETIRED, f"{run}\0{path.name}".encode()]
            assert ids
        for kind_key, body in records.bodies.items():
            assert store_records.bodies[kind_key] == body, "a pack's bodies are byte-identical to the store's"
