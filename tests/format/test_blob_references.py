"""Typed blob and value references (format/refs.py, format/manifest.py): decode_ref turns a manifest's msgpack
array into a typed ref, refusing every malformed shape with a FormatError naming where it was found, and
encode_ref gives back the same array, so the bytes on disk are what they were before refs were typed."""

from __future__ import annotations

import os
from typing import Any

import msgpack
import pytest

from agentfs.errors import FormatError, InvalidName
from agentfs.format.manifest import Manifest, ValueRef, decode_value_ref, encode_value_ref
from agentfs.format.refs import (
    INLINE_MAX,
    MAX_DEPTH,
    InlineRef,
    LooseRef,
    PackedRef,
    Ref,
    TreeRef,
    decode_ref,
    encode_ref,
    located,
    same_bytes,
)
from agentfs.ids import new_id

INLINE, PACKED, LOOSE, TREE = 0, 1, 2, 3  # docs/FORMAT.md, Blob references
OID = bytes(range(32))
CHECKPOINT = "01KDVDNA03BWTQPQWASXFZHZPX"  # fixed: test ids show it, and xdist workers must collect the same ids

WELL_FORMED: list[tuple[list[Any], Ref]] = [
    ([INLINE, b""], InlineRef(b"")),
    ([INLINE, b"x" * INLINE_MAX], InlineRef(b"x" * INLINE_MAX)),
    ([PACKED, OID, 100], PackedRef(OID, 100)),
    ([PACKED, OID, 0, "main", CHECKPOINT], PackedRef(OID, 0, ("main", CHECKPOINT))),
    ([LOOSE, OID, 70_000], LooseRef(OID, 70_000)),
    ([TREE, OID, 1 << 30, 1], TreeRef(OID, 1 << 30, 1)),
    ([TREE, OID, 5, MAX_DEPTH], TreeRef(OID, 5, MAX_DEPTH)),
]

MALFORMED: dict[str, Any] = {
    "not an array": {"kind": INLINE},
    "empty": [],
    "kind not an int": ["0", b"x"],
    "unknown kind": [7, OID, 1],
    "inline without data": [INLINE],
    "inline data not bytes": [INLINE, "text"],
    "inline over INLINE_MAX": [INLINE, b"x" * (INLINE_MAX + 1)],
    "inline with an extra item": [INLINE, b"x", 1],
    "packed without a size": [PACKED, OID],
    "packed oid of 31 bytes": [PACKED, OID[:31], 1],
    "packed oid not bytes": [PACKED, OID.hex(), 1],
    "packed size negative": [PACKED, OID, -1],
    "packed size not an int": [PACKED, OID, "1"],
    "packed with a run but no id": [PACKED, OID, 1, "main"],
    "packed entry not strings": [PACKED, OID, 1, "main", 5],
    "packed with six items": [PACKED, OID, 1, "main", CHECKPOINT, 0],
    "loose with a depth": [LOOSE, OID, 1, 1],
    "loose with an entry": [LOOSE, OID, 1, "main", CHECKPOINT],
    "tree without a depth": [TREE, OID, 1],
    "tree depth 0": [TREE, OID, 1, 0],
    "tree deeper than MAX_DEPTH": [TREE, OID, 1, MAX_DEPTH + 1],
    "tree depth not an int": [TREE, OID, 1, "1"],
}


@pytest.mark.parametrize(("raw", "typed"), WELL_FORMED, ids=[repr(typed)[:40] for _raw, typed in WELL_FORMED])
def test_a_ref_decodes_to_its_typed_value_and_encodes_back_to_the_same_array(raw: list[Any], typed: Ref) -> None:
    assert decode_ref(raw, "test") == typed
    assert encode_ref(typed) == raw
    assert decode_ref(encode_ref(typed), "test") == typed
    assert msgpack.packb(encode_ref(decode_ref(raw, "test")), use_bin_type=True) == msgpack.packb(raw, use_bin_type=True)


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_refs_are_refused(case: str) -> None:
    with pytest.raises(FormatError, match=r"^state\['k'\] of r@x: malformed blob reference"):
        decode_ref(MALFORMED[case], "state['k'] of r@x")


@pytest.mark.parametrize(("run", "checkpoint_id"), [("../x", CHECKPOINT), ("main", "not-an-id")])
def test_a_packed_ref_borrowing_from_a_bad_name_is_refused(run: str, checkpoint_id: str) -> None:
    with pytest.raises(InvalidName):
        decode_ref([PACKED, OID, 1, run, checkpoint_id], "test")


@pytest.mark.parametrize(
    "raw", [[0, 1, [INLINE, b"x"]], [2, 600, [TREE, OID, 99, 2]], [1, 3, [PACKED, OID, 5, "main", CHECKPOINT]]], ids=str
)
def test_a_value_ref_round_trips(raw: list[Any]) -> None:
    value = decode_value_ref(raw, "test")
    assert (value.format, value.items, value.blob) == (raw[0], raw[1], decode_ref(raw[2], "test"))
    assert encode_value_ref(value) == raw


@pytest.mark.parametrize(
    "raw", [[0, 1], [0, "1", [INLINE, b"x"]], ["0", 1, [INLINE, b"x"]], [0, 1, [INLINE, b"x"], 4], (0, 1, [INLINE, b"x"])], ids=str
)
def test_malformed_value_refs_are_refused(raw: Any) -> None:
    with pytest.raises(FormatError, match=r"^state\['k'\]: malformed value reference"):
        decode_value_ref(raw, "state['k']")


def test_a_value_ref_holding_a_malformed_blob_ref_is_refused_naming_the_key() -> None:
    with pytest.raises(FormatError, match=r"^state\['k'\]: malformed blob reference"):
        decode_value_ref([0, 1, [TREE, OID, 1, 0]], "state['k']")


def test_a_manifest_reencodes_to_the_bytes_it_was_read_from() -> None:
    """Typed refs in memory, the same msgpack on disk: a manifest written with arrays (as every store before typed refs
    was) decodes and encodes back byte for byte."""
    state = {"": [0, 1, [INLINE, b"x"]], "a": [1, 2, [PACKED, OID, 100]], "b": [2, 3, [TREE, OID, 1 << 20, 2]]}
    artifacts = {"f.bin": [LOOSE, OID, 70_000], "g.bin": [PACKED, OID, 10, "other", CHECKPOINT]}
    # format 2: [format, parent, created, writer, metadata, state kind (0: map), state, artifacts, optional fields]
    record = [2, None, 1, {"store": "s"}, b"\x80", 0, state, artifacts, {}]
    data = msgpack.packb(record, use_bin_type=True)
    manifest = Manifest.from_bytes(data, "r", CHECKPOINT, "test")
    assert manifest.state["b"] == ValueRef(2, 3, TreeRef(OID, 1 << 20, 2))
    assert manifest.artifacts["g.bin"] == PackedRef(OID, 10, ("other", CHECKPOINT))
    assert manifest.to_bytes() == data


def test_located_gives_a_packed_ref_its_entry_and_leaves_others_alone() -> None:
    home = ("main", CHECKPOINT)
    assert located(PackedRef(OID, 5), home) == PackedRef(OID, 5, home)
    elsewhere = PackedRef(OID, 5, ("other", new_id()))
    assert located(elsewhere, home) is elsewhere
    for ref in (InlineRef(b"x"), LooseRef(OID, 5), TreeRef(OID, 5, 1)):
        assert located(ref, home) is ref
    assert ValueRef(0, 1, PackedRef(OID, 5)).located(home) == ValueRef(0, 1, PackedRef(OID, 5, home))


def test_same_bytes_ignores_where_a_packed_object_is_and_nothing_else() -> None:
    other = os.urandom(32)
    assert same_bytes(PackedRef(OID, 5), PackedRef(OID, 5, ("main", CHECKPOINT)))
    assert not same_bytes(PackedRef(OID, 5), PackedRef(other, 5))
    assert same_bytes(InlineRef(b"x"), InlineRef(b"x")) and not same_bytes(InlineRef(b"x"), InlineRef(b"y"))
    assert not same_bytes(InlineRef(OID), LooseRef(OID, 32))
    assert not ValueRef(0, 1, InlineRef(b"x")).same_value(ValueRef(2, 1, InlineRef(b"x")))  # another encoding
