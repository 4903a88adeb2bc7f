"""A local segment that claims a huge record costs no memory: the length a footer row or a batch claims is
checked against the kind's largest record (format/segment.py max_record_frame) and the segment's size before
anything is read, and a batch is read a frame at a time, never whole. A crafted segment (a sparse file, so the
claim is within its size) is read in a child process whose peak memory is measured; a writer refuses a record
over the format's largest."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import agentfs
from agentfs.engine.segments import SealedSegment, open_indexed, open_segment, seal_copy_path
from agentfs.format import kinds
from agentfs.format import segment as fmt

CLAIM = 96 << 20  # what the crafted record claims: over the largest entry record (64 MiB) and BOUND
BOUND = 64 << 20  # the peak memory over the child's baseline that reading it may cost (issue: bombs, 64 MiB)
ROOT = Path(__file__).resolve().parents[2]


def read_in_child(root: Path, run: str, checkpoint_id: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "tests.helpers.huge_record", str(root), run, checkpoint_id],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr  # a signal or a traceback is a failure, not a refusal
    [result] = json.loads(done.stdout)
    return dict(result)


def segment_files(root: Path) -> list[Path]:
    return sorted(path for path in (root / "segments").iterdir() if path.suffix == fmt.SUFFIX)


def test_a_footer_row_claiming_a_huge_entry_is_refused_before_it_is_read(tmp_path: Path) -> None:
    root = tmp_path / "store"
    with agentfs.open(root) as store:
        checkpoint = store.run("r").commit({"v": "x" * 1000})
        store.gc(grace=0)  # seals the segment: its footer indexes the entry
    [path] = segment_files(root)
    view = open_indexed(path)
    assert isinstance(view, SealedSegment)
    entries = view.footer.entries()
    [entry] = [e for e in entries if e.kind == kinds.ENTRY]
    footer_at = entry.offset + CLAIM  # the entry's row now claims every byte up to a footer CLAIM bytes on
    crafted = [e._replace(length=CLAIM) if e == entry else e for e in entries]
    seal = fmt.encode_seal(view.header.segment_id, footer_at, crafted)
    header = path.read_bytes()[: fmt.HEADER.size]
    with open(path, "r+b") as handle:
        handle.truncate(footer_at)  # sparse: the claim lies within the file
        handle.seek(footer_at)
        handle.write(seal)
    seal_copy_path(path).write_bytes(fmt.encode_seal_copy(header, seal))
    assert isinstance(open_indexed(path), SealedSegment)  # the footer itself is well formed

    result = read_in_child(root, "r", checkpoint.id)
    assert str(result["outcome"]).startswith("IntegrityError: "), result
    assert str(path) in str(result["outcome"]) and f"offset {entry.offset}" in str(result["outcome"])
    assert result["peak_over_baseline"] < BOUND, result


def test_a_batch_whose_record_claims_a_huge_frame_is_not_read_whole(tmp_path: Path) -> None:
    root = tmp_path / "store"
    with agentfs.open(root) as store:
        checkpoint = store.run("r").commit({"v": "x" * 1000})
    [path] = segment_files(root)
    view = open_segment(path)
    assert not view.sealed
    at, segment_id = view.end, view.header.segment_id
    length = fmt.BEGIN_FRAME + fmt.FRAME.size + CLAIM + fmt.END_FRAME
    begin = fmt.encode_frame(fmt.KIND_BEGIN, fmt.BEGIN.pack(fmt.BATCH_MAGIC, segment_id, at, length, 1))
    record_head = fmt.FRAME.pack(CLAIM, 0, kinds.ENTRY)  # an entry frame claiming CLAIM bytes
    with open(path, "r+b") as handle:
        handle.truncate(at + length + (1 << 20))  # sparse: the claimed batch lies within the file
        handle.seek(at)
        handle.write(begin + record_head)

    result = read_in_child(root, "r", checkpoint.id)
    assert result["outcome"] == f"decoded {len(repr({'v': 'x' * 1000}))} bytes", result  # the rest of the store reads
    assert result["peak_over_baseline"] < BOUND, result
    claim = rf"offset {at + fmt.BEGIN_FRAME}: a record frame claims {fmt.FRAME.size + CLAIM} bytes"
    with open(path, "rb") as handle, pytest.raises(agentfs.IntegrityError, match=claim):
        fmt.decode_batch(lambda offset, count: os.pread(handle.fileno(), count, offset), segment_id, at, str(path))


def test_a_writer_refuses_a_record_over_the_formats_largest(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(fmt, "MAX_RECORD_BODY", 0)  # so that a small commit makes an entry over it (the key's 64 KiB allowance)
    with agentfs.open(tmp_path / "store") as store:
        run = store.run("r")
        with pytest.raises(agentfs.SerializationError, match=r"entry record of \d+ bytes: over the format's largest"):
            run.commit({f"key{n}": os.urandom(1000) for n in range(100)})
        assert run.ids() == []
