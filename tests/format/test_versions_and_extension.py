"""docs/FORMAT.md, "Versions and extension": within a version a reader ignores map fields and skips record kinds it
does not know (what a later writer may add), and refuses a version it does not know (what it would misread)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import struct
from pathlib import Path
from typing import Any

import msgpack
import pytest

import agentfs
from agentfs.errors import FormatError, IntegrityError
from agentfs.format import journal, retirement
from agentfs.format.entries import decode_entry_at, encode_entry
from agentfs.format.manifest import MAP_STATE, Manifest
from agentfs.format.sealed import seal, unseal
from agentfs.format.segment import HEADER as SEGMENT_HEADER
from agentfs.format.segment import crc32
from agentfs.ids import new_id
from tests.helpers.format1_entry import format1_entry, format1_manifest, seal1

WRITER = {"store": "s", "host": "h", "pid": 1}


def _reseal(data: bytes, magic: bytes, change: Any) -> bytes:
    """A sealed record whose msgpack body map went through `change`, sealed again (a later writer's record)."""
    fields = msgpack.unpackb(unseal(data, magic, data[3], "record", "test"), raw=False)
    change(fields)
    return seal(magic, data[3], msgpack.packb(fields, use_bin_type=True))


def _manifest(**fields: Any) -> Manifest:
    return Manifest(
        run="r", id=new_id(), parent=None, created=1, writer=WRITER, metadata=b"", state_kind=MAP_STATE, state={}, artifacts={}, **fields
    )


def test_a_config_field_a_later_writer_added_is_read_past_and_kept_by_a_rewrite(tmp_path: Path) -> None:
    root = tmp_path / ".agentfs"
    agentfs.open(root).close()
    config = json.loads((root / "config").read_text())
    (root / "config").write_text(json.dumps({**config, "a_later_field": {"kept": True}}))
    with agentfs.open(root) as store:
        store.run("r").commit({"n": 1})
        store.set_retention(keep_last=5)
    assert json.loads((root / "config").read_text())["a_later_field"] == {"kept": True}
    with agentfs.open(root) as store:
        latest = store.run("r").latest()
        assert latest is not None and latest.state == {"n": 1}


def test_a_config_of_an_unknown_format_is_refused_naming_both_versions(tmp_path: Path) -> None:
    root = tmp_path / ".agentfs"
    agentfs.open(root).close()
    config = json.loads((root / "config").read_text())
    (root / "config").write_text(json.dumps({**config, "format": 3}))
    with pytest.raises(FormatError, match=r"has format 3; this agentfs reads format 2"):
        agentfs.open(root)


def _v2_with_manifest(manifest: Manifest, change: Any) -> bytes:
    """A version-2 entry of `manifest` whose format-2 array went through `change`, its checksum made right again."""
    record = msgpack.unpackb(manifest.to_bytes(), raw=False)
    change(record)
    body = msgpack.packb([msgpack.packb(record, use_bin_type=True), []], use_bin_type=True)
    return b"AFL\x02" + hashlib.sha256(f"{manifest.run}\0{manifest.id}".encode() + body).digest() + body


def test_manifest_journal_and_retirement_fields_a_later_writer_added_are_ignored() -> None:
    manifest = _manifest(schema=2, forked_from=["origin", new_id()])
    later = _v2_with_manifest(manifest, lambda record: record[-1].update(a_later_field=[1, 2]))  # format 2: the map last
    assert decode_entry_at(later, "r", manifest.id, "test").manifest == manifest
    older = format1_entry(manifest, {}, a_later_field=[1, 2])  # format 1: the manifest map itself
    assert decode_entry_at(older, "r", manifest.id, "test").manifest == manifest

    call = new_id()
    record = journal.Record(run="r", id=call, kind=journal.START, key="k", call=call, name="tool", created=1, writer=WRITER, args=b"\x90")
    later = _reseal(record.to_bytes(), journal.MAGIC, lambda f: f.update(a_later_field="x"))
    assert journal.decode_record(later, "r", call, "test") == record

    retired = retirement.Retirement(run="r", id=new_id(), created=1, checkpoints=[new_id()], journal=[])
    later = _reseal(retirement.encode_retirement(retired, WRITER), retirement.MAGIC, lambda f: f.update(a_later_field=None))
    assert retirement.decode_retirement(later, "r", retired.id, "test") == retired


def test_entries_and_manifests_written_before_format_2_are_read() -> None:
    """A version-1 entry (checksum of the body alone) holding a format-1 manifest reads as the same checkpoint; one
    naming another run or id than its key is refused, as before."""
    manifest = dataclasses.replace(_manifest(schema=3), parent=new_id(), writer={"store": new_id(), "host": "h", "pid": 7})
    assert decode_entry_at(format1_entry(manifest, {}), "r", manifest.id, "test").manifest == manifest
    elsewhere = new_id()
    with pytest.raises(FormatError, match=f"holds checkpoint r@{manifest.id}"):
        decode_entry_at(format1_entry(manifest, {}), "r", elsewhere, "test")


def test_an_entry_is_bound_to_its_key() -> None:
    """Version 2's checksum covers the key (run NUL id), which its manifest no longer repeats: the same bytes under
    another key are refused as not their own. Planted: with the key left out of _checksum, the first raises pass."""
    manifest = _manifest()
    data, entry = encode_entry(manifest, {})
    assert decode_entry_at(data, "r", manifest.id, "test") == entry
    for run, checkpoint_id in (("r", new_id()), ("other", manifest.id)):
        with pytest.raises(IntegrityError, match="does not match its checksum"):
            decode_entry_at(data, run, checkpoint_id, "test")


def test_an_unknown_version_of_a_sealed_record_or_of_its_body_is_refused() -> None:
    manifest = _manifest()
    data, _entry = encode_entry(manifest, {})
    assert data[3] == 2
    with pytest.raises(FormatError, match=r"has format version 3, this agentfs reads 1 and 2"):
        decode_entry_at(data[:3] + bytes([3]) + data[4:], "r", manifest.id, "test")
    later = _v2_with_manifest(manifest, lambda record: record.__setitem__(0, 3))
    with pytest.raises(FormatError, match=r"manifest format 3, this agentfs reads 2 here"):
        decode_entry_at(later, "r", manifest.id, "test")
    # each entry version holds its own manifest format: a format-2 manifest in a version-1 entry would name no key
    # that its checksum covers, and a map in a version-2 entry is not what a version-2 writer writes
    body = [manifest.to_bytes(), []]
    with pytest.raises(FormatError, match=r"manifest format 2, this agentfs reads 1 here"):
        decode_entry_at(seal1(body), "r", manifest.id, "test")
    mapped = _v2_with_manifest(manifest, lambda record: None)
    mapped_body = msgpack.packb([msgpack.packb(format1_manifest(manifest), use_bin_type=True), []], use_bin_type=True)
    mapped = mapped[:4] + hashlib.sha256(f"r\0{manifest.id}".encode() + mapped_body).digest() + mapped_body
    with pytest.raises(FormatError, match=r"manifest format 1, this agentfs reads 2 here"):
        decode_entry_at(mapped, "r", manifest.id, "test")
    longer = _v2_with_manifest(manifest, lambda record: record.append("a later field"))  # the array is closed
    with pytest.raises(FormatError, match=r"manifest holds 10 fields, format 2 has 9"):
        decode_entry_at(longer, "r", manifest.id, "test")

    call = new_id()
    record = journal.Record(run="r", id=call, kind=journal.START, key="k", call=call, name="tool", created=1, writer=WRITER, args=b"\x90")
    later = _reseal(record.to_bytes(), journal.MAGIC, lambda f: f.update(format=2))
    with pytest.raises(FormatError, match=r"record format 2, this agentfs reads 1"):
        journal.decode_record(later, "r", call, "test")

    retired = retirement.Retirement(run="r", id=new_id(), created=1, checkpoints=[], journal=[])
    later = _reseal(retirement.encode_retirement(retired, WRITER), retirement.MAGIC, lambda f: f.update(format=2))
    with pytest.raises(FormatError, match=r"has record format 2, this agentfs reads 1"):
        retirement.decode_retirement(later, "r", retired.id, "test")


def test_a_segment_of_an_unknown_version_is_not_read_and_verify_names_it(tmp_path: Path) -> None:
    root = tmp_path / ".agentfs"
    with agentfs.open(root) as store:
        store.run("r").commit({"n": 1})
    segment = next((root / "segments").glob("*.seg"))
    data = bytearray(segment.read_bytes())
    data[8:10] = struct.pack(">H", 3)  # the version, after the 8-byte magic; the header's crc32 made right again
    data[SEGMENT_HEADER.size - 4 : SEGMENT_HEADER.size] = struct.pack(">I", crc32(bytes(data[: SEGMENT_HEADER.size - 4])))
    segment.write_bytes(bytes(data))
    with agentfs.open(root) as store:
        report = store.verify()
        assert not report.ok
        assert f"{segment} has segment format version 3; this agentfs reads 2" in str(report)
