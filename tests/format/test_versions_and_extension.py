"""docs/FORMAT.md, "Versions and extension": within a version a reader ignores map fields and skips record kinds it
does not know (what a later writer may add), and refuses a version it does not know (what it would misread)."""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import msgpack
import pytest

import agentfs
from agentfs.errors import FormatError
from agentfs.format import journal, retirement
from agentfs.format.entries import decode_entry, encode_entry
from agentfs.format.manifest import MAP_STATE, Manifest
from agentfs.format.sealed import HEADER, seal, unseal
from agentfs.format.segment import HEADER as SEGMENT_HEADER
from agentfs.format.segment import crc32
from agentfs.ids import new_id

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


def test_manifest_journal_and_retirement_fields_a_later_writer_added_are_ignored() -> None:
    manifest = _manifest(schema=2)
    data, _entry = encode_entry(manifest, {})
    body = msgpack.unpackb(unseal(data, b"AFL", 1, "log entry", "test"), raw=False)
    fields = msgpack.unpackb(body[0], raw=False)
    fields["a_later_field"] = [1, 2]
    later = seal(b"AFL", 1, msgpack.packb([msgpack.packb(fields, use_bin_type=True), body[1]], use_bin_type=True))
    assert decode_entry(later, "test").manifest == manifest

    call = new_id()
    record = journal.Record(run="r", id=call, kind=journal.START, key="k", call=call, name="tool", created=1, writer=WRITER, args=b"\x90")
    later = _reseal(record.to_bytes(), journal.MAGIC, lambda f: f.update(a_later_field="x"))
    assert journal.decode_record(later, "r", call, "test") == record

    retired = retirement.Retirement(run="r", id=new_id(), created=1, checkpoints=[new_id()], journal=[])
    later = _reseal(retirement.encode_retirement(retired, WRITER), retirement.MAGIC, lambda f: f.update(a_later_field=None))
    assert retirement.decode_retirement(later, "r", retired.id, "test") == retired


def test_an_unknown_version_of_a_sealed_record_or_of_its_body_is_refused() -> None:
    manifest = _manifest()
    data, _entry = encode_entry(manifest, {})
    with pytest.raises(FormatError, match=r"has format version 2, this agentfs reads 1"):
        decode_entry(data[:3] + bytes([2]) + data[4:], "test")
    body = msgpack.unpackb(data[HEADER:], raw=False)
    fields = {**msgpack.unpackb(body[0], raw=False), "format": 2}
    later = seal(b"AFL", 1, msgpack.packb([msgpack.packb(fields, use_bin_type=True), body[1]], use_bin_type=True))
    with pytest.raises(FormatError, match=r"manifest format 2, this agentfs reads 1"):
        decode_entry(later, "test")

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
