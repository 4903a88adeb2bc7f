"""Segment-file workloads for the crash-state test and the multi-process tests of tests/engine/test_segments.py.

`python -m tests.crashsim.segment_workloads NAME DIR [ARGS]` works on DIR/store/segments (locks in
DIR/store/locks):

- `batches DIR`: a writer appends batches that roll over segments (sealing them), closes; a second
  writer adopts the slot's unsealed segment and appends more. Each batch is acknowledged with
  `trace.ack` the instant `append` returned.
- `writer DIR NAME COUNT`: appends COUNT batches (forever if COUNT is 0), printing "ack N" flushed after
  each append returned; for the SIGKILL and concurrent-writer tests.

Record bodies are derived from their keys (`body_of`), so a checker knows every byte to expect.
With AGENTFS_CRASHSIM_PLANT set, one sync call site is disabled first (PLANTS).
"""

from __future__ import annotations

import hashlib
import os
import random
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentfs.engine import sealing, segment_writer
from agentfs.engine.segment_writer import SegmentWriter
from agentfs.engine.segments import SegmentReader
from agentfs.format.segment import FIRST_RECORD_KIND, Record

from .plants import ENV
from .trace import ack

SEGMENT_BYTES = 16_384  # small, so the workload rolls over and seals
PREALLOCATION_STEP = 4096  # smaller still, so that a segment grows between rollovers


def body_of(key: bytes) -> bytes:
    rng = random.Random(hashlib.sha256(key).digest())
    return rng.randbytes(rng.randrange(0, 3_000))


def batch(name: str, number: int) -> list[Record]:
    keys = [f"{name}/{number}/{index}".encode() for index in range(1 + number % 3)]
    return [Record(FIRST_RECORD_KIND + index, key, body_of(key)) for index, key in enumerate(keys)]


def paths(directory: Path) -> tuple[Path, Path]:
    return directory / "store" / "segments", directory / "store" / "locks"


def batches(directory: Path) -> None:
    for name, count in (("first", 8), ("adopter", 8)):
        with SegmentWriter(*paths(directory), segment_bytes=SEGMENT_BYTES, slots=2, preallocation_step=PREALLOCATION_STEP) as writer:
            for number in range(count):
                records = batch(name, number)
                writer.append(records)
                ack({"call": "batch", "keys": [record.key.hex() for record in records]})


def writer(directory: Path, name: str, count: str) -> None:
    with SegmentWriter(*paths(directory), segment_bytes=SEGMENT_BYTES) as appender:
        number = 0
        while number < int(count) or int(count) == 0:
            appender.append(batch(name, number))
            print(f"ack {number} slot {appender.slot}", flush=True)
            number += 1
        print("done", flush=True)
        sys.stdin.read()  # holds the slot until the test closes stdin: writers that must overlap do


def check(root: Path, acks: list[dict[str, Any]]) -> list[str]:
    """Problems in one crash state of DIR/store (`root`): lost acknowledged records, torn ones, a failed append."""
    problems = _check_records(root, {bytes.fromhex(key) for record in acks for key in record["keys"]})
    try:
        with SegmentWriter(root / "segments", root / "locks", durability="process", segment_bytes=SEGMENT_BYTES, slots=2) as after:
            after.append(batch("after", 0))
    except Exception as exc:  # any failure to adopt and append is the finding
        return [*problems, f"commit: appending after the crash failed: {type(exc).__name__}: {exc}"]
    return problems or _check_records(root, {record.key for record in batch("after", 0)})


def _check_records(root: Path, expected: set[bytes]) -> list[str]:
    reader = SegmentReader(root / "segments")
    problems, seen = [], set()
    for _kind, key, location in list(reader.records()):
        try:
            body = reader.read(location).body
        except Exception as exc:
            problems.append(f"torn: record {key!r} is listed but unreadable: {exc}")
            continue
        if body != body_of(key):
            problems.append(f"torn: record {key!r} reads back different bytes")
        seen.add(key)
    problems.extend(f"lost: acknowledged record {key!r} is missing" for key in sorted(expected - seen))
    problems.extend(f"verify: {problem}" for problem in reader.problems)
    return problems


def _skip_fdatasync() -> None:
    os.fdatasync = lambda fd: None


def _skip_dir_fsync() -> None:
    segment_writer.fsync_dir = lambda path: None  # type: ignore[assignment]
    sealing.fsync_dir = lambda path: None  # type: ignore[assignment]  # the seal copy's, which would cover the entry too


PLANTS: dict[str, Callable[[], None]] = {
    "segment-fdatasync": _skip_fdatasync,  # the batch's one fdatasync
    "segment-dir-fsync": _skip_dir_fsync,  # the segments directory, after a new segment's entry
}
WORKLOADS: dict[str, Callable[..., None]] = {"batches": batches, "writer": writer}


def main(argv: list[str]) -> None:
    name, directory, *rest = argv
    plant = os.environ.get(ENV)
    if plant is not None:
        PLANTS[plant]()
    WORKLOADS[name](Path(directory), *rest)


if __name__ == "__main__":
    main(sys.argv[1:])
