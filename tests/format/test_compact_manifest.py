"""docs/FORMAT.md, "Manifest" (format 2) and "Log entries" (version 2): the positional manifest without its run and
id, read back as the checkpoint it was written as whatever its optional parts, and every malformed item refused with
a FormatError naming the field and the entry, never a bare TypeError, IndexError or UnicodeError."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import agentfs
from agentfs.errors import AgentFSError, FormatError, IntegrityError, SerializationError
from agentfs.format import codec
from agentfs.format.entries import decode_entry_at, encode_entry, packed_here
from agentfs.format.manifest import MAP_STATE, VALUE_STATE, Manifest, ValueRef
from agentfs.format.refs import InlineRef, PackedRef, TreeRef
from agentfs.ids import id_bytes, id_of_bytes, new_id
from tests.helpers import raw

DATA = b"a packed value " * 10
OID = hashlib.sha256(DATA).digest()
PACK = {OID: codec.encode(DATA, in_entry=True)}  # what the manifest's own PACKED ref names
STORE = new_id()


def _manifest(**fields: Any) -> Manifest:
    base: dict[str, Any] = {
        "run": "team/agent",
        "id": new_id(),
        "parent": new_id(),
        "created": 1_795_826_682_653_828_769,
        "writer": {"store": STORE, "host": "vm", "pid": 28744},
        "metadata": msgpack.packb({"k": "v"}),
        "state_kind": MAP_STATE,
        "state": {"msgs": ValueRef(1, 7, PackedRef(OID, 3483, None)), "n": ValueRef(0, 0, InlineRef(b"\x01"))},
        "artifacts": {"out.bin": TreeRef(OID, 1 << 20, 2), "small.txt": PackedRef(OID, 10, ("other", new_id()))},
    }
    return Manifest(**{**base, **fields})


def _entry(manifest: Manifest, change: Any = None) -> bytes:
    """The version-2 entry of `manifest`, its manifest array changed by `change` (the checksum made right again)."""
    record = msgpack.unpackb(manifest.to_bytes(), raw=False)
    if change is not None:
        change(record)
    body = msgpack.packb([msgpack.packb(record, use_bin_type=True), list(PACK.values())], use_bin_type=True)
    return b"AFL\x02" + hashlib.sha256(f"{manifest.run}\0{manifest.id}".encode() + body).digest() + body


@pytest.mark.parametrize(
    "changes",
    [
        {},
        {"parent": None, "state_kind": VALUE_STATE, "state": {"": ValueRef(2, 0, InlineRef(b""))}, "artifacts": {}},
        {"forked_from": ["origin/run", new_id()], "schema": 3, "parent": None},
        {"writer": {"store": "s", "host": "h", "pid": 1}},  # not a ULID store id: the map, as format 1 held it
        {"writer": {"host": "h", "pid": 1, "store": STORE}},  # another order: the map too
        {"writer": {"store": STORE, "host": "h", "pid": 1, "extra": True}},
        {"parent": "8" + new_id()[1:]},  # an id 16 bytes cannot hold (names.ID allows it): its 26 digits
        {"forked_from": ["origin", "Z" + new_id()[1:]]},
    ],
    ids=["plain", "value state", "fork and schema", "other writer", "writer order", "writer extra", "big parent", "big fork id"],
)
def test_a_manifest_reads_back_as_written(changes: dict[str, Any]) -> None:
    manifest = _manifest(**changes)
    data, entry = encode_entry(manifest, PACK)
    read = decode_entry_at(data, manifest.run, manifest.id, "test")
    assert read.manifest == manifest == entry.manifest
    assert read.pack == entry.pack == {oid: PACK[oid] for oid in packed_here(manifest)}
    assert list(read.manifest.writer) == list(manifest.writer)  # the same map, keys in the same order


def test_the_manifest_holds_neither_its_run_nor_its_id_and_is_smaller_than_format_1() -> None:
    manifest = _manifest(run="adk/bench/session/u/s")
    data = manifest.to_bytes()
    assert manifest.run.encode() not in data and manifest.id.encode() not in data
    assert id_bytes(manifest.id) not in data
    assert id_bytes(manifest.parent or "") in data and id_bytes(STORE) in data  # 16 bytes, not 26 characters
    assert manifest.parent is not None and manifest.parent.encode() not in data and STORE.encode() not in data


def test_the_packed_objects_are_stored_without_their_oids_in_the_order_the_manifest_names_them() -> None:
    """Version 2 stores a packed object's oid once, in the manifest's ref; the entry's list follows the sorted oids.
    Planted: with _pack's count check removed, the short and long lists below were read (zip drops the rest)."""
    more = b"another packed value " * 8
    other = hashlib.sha256(more).digest()
    state = {
        "a": ValueRef(0, 0, PackedRef(OID, len(DATA))),
        "b": ValueRef(0, 0, PackedRef(other, len(more))),
        "c": ValueRef(0, 0, PackedRef(OID, len(DATA))),
    }
    manifest = _manifest(state=state, artifacts={})
    pack = {**PACK, other: codec.encode(more, in_entry=True)}
    data, _entry = encode_entry(manifest, {**pack, hashlib.sha256(b"unnamed").digest(): b"x"})  # an object no ref names: not stored
    assert data.count(OID) == 2 and data.count(other) == 1  # in the refs only ("a" and "c" name OID)
    entry = decode_entry_at(data, manifest.run, manifest.id, "here")
    assert entry.pack == pack and entry.packed(OID, "here") == DATA and entry.packed(other, "here") == more
    for blobs in ([pack[min(pack)]], [*pack.values(), b"AFO"]):
        body = msgpack.packb([manifest.to_bytes(), blobs], use_bin_type=True)
        crafted = b"AFL\x02" + hashlib.sha256(f"{manifest.run}\0{manifest.id}".encode() + body).digest() + body
        with pytest.raises(FormatError, match=r"here is malformed: it packs \d objects where its manifest names 2"):
            decode_entry_at(crafted, manifest.run, manifest.id, "here")
    swapped = msgpack.packb([manifest.to_bytes(), [pack[max(pack)], pack[min(pack)]]], use_bin_type=True)
    crafted = b"AFL\x02" + hashlib.sha256(f"{manifest.run}\0{manifest.id}".encode() + swapped).digest() + swapped
    entry = decode_entry_at(crafted, manifest.run, manifest.id, "here")
    with pytest.raises(IntegrityError):  # an object in another's place fails its oid when read, as every object does
        entry.packed(OID, "here")
    with pytest.raises(SerializationError, match="packs objects it was not given"):
        encode_entry(manifest, PACK)


def test_ids_round_trip_through_16_bytes() -> None:
    for _ in range(1000):
        checkpoint_id = new_id()
        packed = id_bytes(checkpoint_id)
        assert packed is not None and len(packed) == 16 and id_of_bytes(packed) == checkpoint_id
    assert id_of_bytes(bytes(16)) == "0" * 26 and id_of_bytes(b"\xff" * 16) == "7" + "Z" * 25
    assert id_bytes("8" + "0" * 25) is None


POSITIONS = {"parent": 1, "created": 2, "writer": 3, "metadata": 4, "state": 6, "artifacts": 7}
MALFORMED: list[tuple[str, Any, str]] = [  # (field, bad value, what the error names)
    ("parent", b"short", "'parent'"),
    ("parent", "01M8FSS2RX8C6YZGV4761QTZ6K", "'parent'"),  # the 26 digits of an id that fits: not what a writer writes
    ("parent", "not an id at all, but long", "'parent'"),
    ("parent", 7, "'parent'"),
    ("created", "yesterday", "'created'"),
    ("created", True, "'created'"),
    ("writer", "me", "'writer'"),
    ("writer", [b"short", "h", 1], "'writer'"),
    ("writer", [bytes(16), "h"], "'writer'"),
    ("writer", [bytes(16), "h", "1"], "'writer'"),
    ("metadata", "text, not bytes", "'metadata'"),
    ("state", {"k": [0, 1, [7]]}, "state['k']"),
    ("state", [], "'state'"),
    ("artifacts", {"a.bin": [2, b"short", 3]}, "artifact 'a.bin'"),
    ("artifacts", {"../../evil": [0, b"x"]}, "../../evil"),
    ("artifacts", [], "'artifacts'"),
]


@pytest.mark.parametrize(("field", "value", "named"), MALFORMED, ids=[f"{f}={str(v)[:20]}" for f, v, _ in MALFORMED])
def test_a_malformed_field_is_refused_naming_it_and_the_entry(field: str, value: Any, named: str) -> None:
    manifest = _manifest()
    data = _entry(manifest, lambda record: record.__setitem__(POSITIONS[field], value))
    with pytest.raises(FormatError, match="team/agent@") as refused:
        decode_entry_at(data, manifest.run, manifest.id, f"team/agent@{manifest.id}")
    assert named in str(refused.value)


@pytest.mark.parametrize(
    ("change", "named"),
    [
        (lambda r: r.__setitem__(5, 2), "'state'"),  # a state kind past the two
        (lambda r: r.__setitem__(5, "map"), "'state'"),  # format 1's name where format 2 has its index
        (lambda r: r.__setitem__(8, []), "optional fields"),
        (lambda r: r[8].update(forked_from=["origin"]), "'forked_from'"),
        (lambda r: r[8].update(forked_from=["../up", bytes(16)]), "'forked_from'"),
        (lambda r: r[8].update(forked_from=["origin", b"short"]), "'forked_from'"),
        (lambda r: r[8].update(schema=0), "'schema'"),
        (lambda r: r.pop(), "holds 8 fields"),
        (lambda r: r.clear(), "manifest format None"),
    ],
    ids=["kind 2", "kind name", "optional list", "fork short", "fork run", "fork id", "schema 0", "8 items", "empty"],
)
def test_malformed_structure_is_refused_naming_it(change: Any, named: str) -> None:
    manifest = _manifest()
    with pytest.raises(FormatError) as refused:
        decode_entry_at(_entry(manifest, change), manifest.run, manifest.id, "here")
    assert named in str(refused.value) and "here" in str(refused.value)


msgpack_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats() | st.text(max_size=30) | st.binary(max_size=40),
    lambda children: st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)


@settings(max_examples=150, deadline=None)
@given(position=st.integers(0, 9), value=msgpack_values)
def test_any_value_at_any_position_is_read_or_refused_as_an_agentfs_error(position: int, value: Any) -> None:
    """Planted: with _read_writer's length check removed, a writer of 2 items raised a bare ValueError (here and above)."""
    manifest = _manifest()

    def change(record: list[Any]) -> None:
        if position < len(record):
            record[position] = value
        else:
            record.append(value)

    try:
        decode_entry_at(_entry(manifest, change), manifest.run, manifest.id, "here")
    except AgentFSError as refused:
        assert "here" in str(refused)


def test_a_malformed_manifest_in_a_store_is_refused_naming_the_checkpoint(tmp_path: Path) -> None:
    root = tmp_path / ".agentfs"
    with agentfs.open(root) as store:
        run = store.run("team/agent")
        run.commit({"n": 1})
        cp = run.commit({"n": 2})
    manifest = _manifest(run=cp.run, id=cp.id)
    raw.set_record_bytes(root, cp.run, raw.LOG_RECORDS, cp.id, _entry(manifest, lambda r: r.__setitem__(2, "yesterday")))
    with agentfs.open(root) as store:
        with pytest.raises(FormatError, match=f"team/agent@{cp.id}.*'created'"):
            store.run("team/agent").get(cp.id)
        assert not store.verify().ok


def test_a_packed_ref_naming_its_own_entry_keeps_its_object() -> None:
    """Planted: with packed_here taking refs that name no entry only, the object was not stored and the read failed."""
    checkpoint_id = new_id()
    state = {"self": ValueRef(0, 0, PackedRef(OID, len(DATA), ("team/agent", checkpoint_id)))}
    manifest = _manifest(id=checkpoint_id, state=state, artifacts={})
    data, _entry = encode_entry(manifest, PACK)
    assert decode_entry_at(data, "team/agent", checkpoint_id, "here").packed(OID, "here") == DATA
