"""Format-2 segment files on their own: frames, batches, sealing, adoption, durability.

Real files, real processes (SIGKILL, two writers at once), strace for syscall counts and bytes read,
and the crash-state harness (tests/crashsim) for power loss.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Any

import pytest

import agentfs
from agentfs.engine.segment_writer import SegmentWriter
from agentfs.engine.segments import FrameLocation, SegmentReader, open_segment, peek, segment_ids
from agentfs.errors import FormatError, IntegrityError
from agentfs.format import kinds
from agentfs.format import segment as fmt
from tests.crashsim.explore import explore
from tests.crashsim.segment_workloads import PLANTS, SEGMENT_BYTES, batch, body_of, check

WORKLOADS = "tests.crashsim.segment_workloads"
REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
needs_strace = pytest.mark.usefixtures("strace_installed")
pytestmark = pytest.mark.timeout(120)


def writer(root: Path, **options: Any) -> SegmentWriter:
    return SegmentWriter(root / "segments", root / "locks", **options)


def contents(root: Path) -> dict[bytes, bytes]:
    reader = SegmentReader(root / "segments")
    found = {key: reader.read(location).body for _kind, key, location in reader.records()}
    assert reader.problems == []
    return found


def expected(name: str, count: int) -> dict[bytes, bytes]:
    return {record.key: record.body for number in range(count) for record in batch(name, number)}


def expected_batch(name: str, number: int) -> dict[bytes, bytes]:
    return {record.key: record.body for record in batch(name, number)}


def only_segment(root: Path) -> Path:
    (segment_id,) = segment_ids(root / "segments")
    return root / "segments" / fmt.segment_name(segment_id)


def test_round_trip_across_rollover_and_seal(tmp_path: Path) -> None:
    with writer(tmp_path, segment_bytes=SEGMENT_BYTES) as appender:
        locations = {}
        for number in range(40):
            records = batch("w", number)
            for record, location in zip(records, appender.append(records), strict=True):
                locations[record.key] = (record.kind, location)
    ids = segment_ids(tmp_path / "segments")
    assert len(ids) > 2, "the workload should have rolled over"
    views = [open_segment(tmp_path / "segments" / fmt.segment_name(i)) for i in ids]
    assert [view.sealed for view in views] == [True] * (len(ids) - 1) + [False]
    assert all(view.path.stat().st_size <= SEGMENT_BYTES + 4096 for view in views[:-1]), "sealing drops the preallocation"
    reader = SegmentReader(tmp_path / "segments")
    assert {key: (kind, location) for kind, key, location in reader.records()} == locations
    assert contents(tmp_path) == expected("w", 40)
    kind, location = locations[b"w/7/1"]
    assert reader.read(location) == fmt.Record(kind, b"w/7/1", body_of(b"w/7/1"))


def test_a_segment_deleted_by_hand_under_its_writer_makes_the_next_append_start_a_new_one(tmp_path: Path) -> None:
    with writer(tmp_path) as appender:
        appender.append(batch("w", 0))
        only_segment(tmp_path).unlink()  # by hand: the writer's descriptor still points at the unlinked inode
        appender.append(batch("w", 1))
        appender.append(batch("w", 2))
    assert contents(tmp_path) == {**expected_batch("w", 1), **expected_batch("w", 2)}


def test_a_batch_larger_than_the_bound_gets_a_segment_of_its_own(tmp_path: Path) -> None:
    big = fmt.Record(fmt.FIRST_RECORD_KIND, b"big", os.urandom(3 * SEGMENT_BYTES))
    with writer(tmp_path, segment_bytes=SEGMENT_BYTES, durability="process") as appender:
        appender.append(batch("w", 0))
        (location,) = appender.append([big])
        appender.append(batch("w", 1))
    assert SegmentReader(tmp_path / "segments").read(location) == big
    assert contents(tmp_path) == {**expected("w", 2), b"big": big.body}


def small_batch(name: str, number: int) -> list[fmt.Record]:
    """Two short records: small enough to cut or damage a batch at every one of its bytes."""
    keys = [f"{name}/{number}/{index}".encode() for index in range(2)]
    return [fmt.Record(fmt.FIRST_RECORD_KIND + index, key, key * 3) for index, key in enumerate(keys)]


def small_contents(numbers: range | tuple[int, ...], name: str = "w") -> dict[bytes, bytes]:
    return {record.key: record.body for number in numbers for record in small_batch(name, number)}


def read_all(root: Path) -> tuple[dict[bytes, bytes], list[str]]:
    reader = SegmentReader(root / "segments")
    found = {key: reader.read(location).body for _kind, key, location in reader.records()}
    return found, reader.problems


def test_a_torn_batch_at_every_byte_is_never_read_and_the_next_writer_overwrites_it(tmp_path: Path) -> None:
    options: dict[str, Any] = {"durability": "process", "segment_bytes": SEGMENT_BYTES}
    probe = tmp_path / "probe"
    with writer(probe, **options) as appender:
        appender.append(small_batch("w", 0))
        start = appender.position
    torn_batch, _ = fmt.encode_batch(segment_ids(probe / "segments")[0], start, small_batch("torn", 1))
    for cut in range(1, len(torn_batch)):
        root = tmp_path / str(cut)
        shutil.copytree(probe, root)
        fd = os.open(only_segment(root), os.O_WRONLY)
        os.pwrite(fd, torn_batch[:cut], start)  # a crash mid-append: a prefix of the batch reached the disk
        os.close(fd)
        assert read_all(root) == (small_contents((0,)), []), f"cut at byte {cut}"
        with writer(root, **options) as adopter:
            assert adopter.position == start
            adopter.append(small_batch("w", 1))
        assert read_all(root) == (small_contents((0, 1)), []), f"cut at byte {cut}"
        shutil.rmtree(root)


@pytest.mark.parametrize("damaged", [2, 4])
def test_a_flipped_byte_is_reported_and_hides_no_later_batch(damaged: int, tmp_path: Path) -> None:
    """Every byte of a middle batch; every record byte of the last one (damage to the BEGIN or END frame
    of the last batch of an unsealed segment is indistinguishable from a torn append, and is treated as one)."""
    options: dict[str, Any] = {"durability": "process", "segment_bytes": SEGMENT_BYTES}
    probe = tmp_path / "probe"
    with writer(probe, **options) as appender:
        bounds = []
        for number in range(5):
            before = appender.position
            appender.append(small_batch("w", number))
            bounds.append((before, appender.position))
        end = appender.position
    pristine = only_segment(probe).read_bytes()
    start, stop = bounds[damaged]
    if damaged == 4:
        start, stop = start + fmt.BEGIN_FRAME, stop - fmt.END_FRAME
    for offset in range(start, stop):
        root = tmp_path / "damaged"
        shutil.copytree(probe, root)
        segment = only_segment(root)
        data = bytearray(pristine)
        data[offset] ^= 0x40
        segment.write_bytes(bytes(data))
        found, problems = read_all(root)
        assert found == small_contents(tuple(n for n in range(5) if n != damaged)), f"flipped byte at {offset}"
        assert len(problems) == 1 and str(segment) in problems[0], problems
        with writer(root, **options) as adopter:
            assert adopter.position == end, "the adopter writes after the last intact batch, never over the damaged one"
        shutil.rmtree(root)


def test_reading_a_damaged_record_raises_integrity_error(tmp_path: Path) -> None:
    with writer(tmp_path, durability="process") as appender:
        (location, *_) = appender.append(batch("w", 2))
    segment = only_segment(tmp_path)
    data = bytearray(segment.read_bytes())
    data[location.offset + location.length - 1] ^= 1
    segment.write_bytes(bytes(data))
    with pytest.raises(IntegrityError, match=re.escape(f"{segment} offset {location.offset}")):
        SegmentReader(tmp_path / "segments").read(location)
    with pytest.raises(IntegrityError, match="a frame says"):  # a location that is not a frame's
        SegmentReader(tmp_path / "segments").read(FrameLocation(location.segment_id, 0, location.length))


def test_a_damaged_footer_falls_back_to_scanning(tmp_path: Path) -> None:
    with writer(tmp_path, durability="process") as appender:
        for number in range(4):
            appender.append(batch("w", number))
        footer_at = appender.position
        appender.seal()
    segment = only_segment(tmp_path)
    data = bytearray(segment.read_bytes())
    data[footer_at + fmt.FRAME.size + 2] ^= 1
    segment.write_bytes(bytes(data))
    reader = SegmentReader(tmp_path / "segments")
    assert {key for _kind, key, _location in reader.records()} == set(expected("w", 4))
    assert len(reader.problems) == 1 and "scanning the segment instead" in reader.problems[0]


def test_a_segment_of_another_version_is_refused(tmp_path: Path) -> None:
    with writer(tmp_path, durability="process") as appender:
        appender.append(batch("w", 0))
    header = fmt.encode_header(1, 0, bytes(16)).replace(fmt.SEGMENT_MAGIC + b"\x00\x02", fmt.SEGMENT_MAGIC + b"\x00\x03")
    fields = header[:-4]
    segment = only_segment(tmp_path)
    data = segment.read_bytes()
    segment.write_bytes(fields + zlib.crc32(fields).to_bytes(4, "big") + data[fmt.HEADER.size :])
    reader = SegmentReader(tmp_path / "segments")
    assert list(reader.records()) == []
    assert reader.problems == [f"{segment} has segment format version 3; this agentfs reads 2"]
    with writer(tmp_path, durability="process") as appender:  # a segment it cannot read is not one it continues
        appender.append(batch("w", 1))
    reader = SegmentReader(tmp_path / "segments")
    assert {key for _kind, key, _location in reader.records()} == set(expected_batch("w", 1))
    assert len(reader.problems) == 1


def spawn_writer(root: Path, name: str, count: int) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", WORKLOADS, "writer", str(root), name, str(count)]
    return subprocess.Popen(command, env=ENV, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)


def test_adoption_after_a_sigkilled_writer_process_keeps_every_acknowledged_byte(tmp_path: Path) -> None:
    child = spawn_writer(tmp_path, "killed", 0)  # appends until killed
    assert child.stdout is not None
    acknowledged = [child.stdout.readline() for _ in range(25)]
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=30)
    acked = len(acknowledged)
    assert all(line.startswith("ack ") for line in acknowledged)
    store = tmp_path / "store"
    before = {view.path: view for view in SegmentReader(store / "segments").segments()}
    survived = contents(store)
    assert set(expected("killed", acked)) <= set(survived)
    assert all(body_of(key) == body for key, body in survived.items())
    newest = max(before)
    old_bytes = newest.read_bytes()[: before[newest].end]
    with writer(store, segment_bytes=SEGMENT_BYTES) as adopter:
        assert (adopter.segment_id, adopter.position) == (before[newest].header.segment_id, before[newest].end)
        adopter.append(batch("adopter", 0))
    assert newest.read_bytes()[: len(old_bytes)] == old_bytes, "adoption rewrote an acknowledged byte"
    assert contents(store) == {**survived, **expected("adopter", 1)}


def test_two_writer_processes_append_at_once_to_separate_segments(tmp_path: Path) -> None:
    children = [spawn_writer(tmp_path, name, 60) for name in ("a", "b")]
    outputs: list[list[str]] = [[], []]
    for child, output in zip(children, outputs, strict=True):  # both hold their slot until both are done
        assert child.stdout is not None
        while (line := child.stdout.readline()) not in ("done\n", ""):
            output.append(line)
    for child in children:
        child.communicate(timeout=60)
    assert [child.returncode for child in children] == [0, 0]
    slots = [{line.rsplit(" ", 1)[1] for line in output} for output in outputs]
    assert len(slots[0] | slots[1]) == 2, f"the writers shared a slot: {slots}"
    store = tmp_path / "store"
    assert contents(store) == {**expected("a", 60), **expected("b", 60)}
    for view in SegmentReader(store / "segments").segments():
        writers = {entry.key.split(b"/")[0] for entry in view.entries}
        assert len(writers) == 1, f"{view.path} holds records of {writers}"


def strace(tmp_path: Path, expressions: str, code: str) -> str:
    """Run `code` under strace (one Python process, threads followed) and return the trace."""
    output = tmp_path / "strace.txt"
    command = ["strace", "-f", "-yy", "-o", str(output), "-e", expressions, sys.executable, "-c", code]
    subprocess.run(command, env=ENV, check=True, timeout=60)
    return output.read_text()


def bytes_read(trace: str, path: Path) -> int:
    return sum(int(size) for size in re.findall(rf"pread64\(\d+<{re.escape(str(path))}>.*\) = (\d+)$", trace, re.MULTILINE))


@needs_strace
def test_opening_a_sealed_segment_reads_only_its_footer(tmp_path: Path) -> None:
    with writer(tmp_path, durability="process") as appender:
        for number in range(300):
            appender.append(batch("w", number))
        appender.seal()
    segment = only_segment(tmp_path)
    unsealed = tmp_path / "unsealed" / segment.name
    unsealed.parent.mkdir()
    seal_at = open_segment(segment).end
    unsealed.write_bytes(segment.read_bytes()[:seal_at])
    code = "import sys; from pathlib import Path; from agentfs.engine.segments import open_segment; open_segment(Path(sys.argv[1]))"
    sealed_read = bytes_read(strace(tmp_path, "trace=pread64", code.replace("sys.argv[1]", repr(str(segment)))), segment)
    scanned = bytes_read(strace(tmp_path, "trace=pread64", code.replace("sys.argv[1]", repr(str(unsealed)))), unsealed)
    footer = segment.stat().st_size - seal_at  # the footer frame and the trailer
    assert sealed_read == fmt.HEADER.size + footer  # the header, then the trailer and the footer frame it points at
    assert scanned >= seal_at > 20 * sealed_read


def syscall_counts(tmp_path: Path, batches: int, durability: str) -> dict[str, int]:
    code = (
        "from pathlib import Path; from tests.crashsim.segment_workloads import batch; "
        "from agentfs.engine.segment_writer import SegmentWriter\n"
        f"root = Path({str(tmp_path / durability / str(batches))!r})\n"
        f"with SegmentWriter(root / 'segments', root / 'locks', durability={durability!r}) as w:\n"
        f"    for n in range({batches}): w.append(batch('w', n))\n"
    )
    trace = strace(tmp_path, "trace=fdatasync,fsync,fallocate,pwrite64,%%stat", code)
    segment = str(tmp_path / durability / str(batches) / "segments")
    made_aside = str(tmp_path / durability / str(batches) / "tmp") + "/"  # a new segment is made in tmp/, then linked in
    calls = re.findall(r"^\d+\s+(\w+)\((\d+)<([^>]*)>", trace, re.MULTILINE)
    counts = {name: 0 for name in ("fdatasync", "fsync", "fallocate", "pwrite64", "fsync_segment_dir")}
    # by descriptor or by name: see SegmentWriter._unlinked for what a stat of a segment costs its writes
    counts["stat"] = len(re.findall(rf"^\d+\s+\w*stat\w*\(.*{re.escape(segment)}/", trace, re.MULTILINE))
    for name, _fd, path in calls:
        if path.startswith(segment + "/") or (path.startswith(made_aside) and fmt.SUFFIX in path):
            counts[name] += 1
        elif path == segment and name == "fsync":
            counts["fsync_segment_dir"] += 1
    return counts


@needs_strace
def test_one_write_and_one_fdatasync_per_batch_into_a_preallocated_segment(tmp_path: Path) -> None:
    few, many = syscall_counts(tmp_path, 5, "power"), syscall_counts(tmp_path, 40, "power")
    assert (few["fdatasync"], many["fdatasync"]) == (5, 40)
    # the header and the first step's zeros, then one write per batch and one of zeros per further step
    assert few["pwrite64"] == 2 + 5 and 2 + 40 <= many["pwrite64"] <= 2 + 40 + 40 // 10  # steps, not per batch
    assert few["fallocate"] == many["fallocate"] == 0  # synced batches go into written zeros
    assert few["fsync"] == many["fsync"] == 1 and few["fsync_segment_dir"] == many["fsync_segment_dir"] == 1
    assert few["stat"] == many["stat"] == 0, "a stat of the segment makes each later write dirty its inode"
    process = syscall_counts(tmp_path, 40, "process")
    assert process["fdatasync"] == process["fsync"] == process["fsync_segment_dir"] == 0
    assert process["pwrite64"] == 41 and 1 <= process["fallocate"] <= 40 // 10  # no zeros written: fallocated


@needs_strace
def test_every_power_loss_state_keeps_every_acknowledged_batch(tmp_path: Path) -> None:
    result = explore(WORKLOADS, "batches", tmp_path, check, max_cuts=None, samples=2)
    segments = {op.path for op in result.ops if op.kind == "open" and "O_CREAT" in op.flags and op.path.endswith(fmt.SUFFIX)}
    assert len(segments) >= 3, "the workload should roll over (and seal) more than once"
    assert result.acks == 16 and result.states > 2 * result.cuts
    assert not result.findings, "\n".join(map(str, result.findings[:10]))


@needs_strace
@pytest.mark.parametrize("plant", sorted(PLANTS))
def test_a_planted_missing_sync_loses_an_acknowledged_batch(plant: str, tmp_path: Path) -> None:
    result = explore(WORKLOADS, "batches", tmp_path, check, plant=plant, max_cuts=None)
    assert result.lost(), f"planting {plant} went unnoticed in {result.states} states"


@pytest.mark.parametrize(
    ("record", "message"),
    [
        (fmt.Record(fmt.KIND_FOOTER, b"k", b""), "record kind 3 is outside 16..255"),
        (fmt.Record(fmt.FIRST_RECORD_KIND, bytes(fmt.MAX_KEY + 1), b""), "record key of 65536 bytes"),
    ],
)
def test_a_record_the_format_cannot_frame_is_refused_before_anything_is_written(record: fmt.Record, message: str, tmp_path: Path) -> None:
    with writer(tmp_path, durability="process") as appender:
        appender.append(batch("w", 0))
        with pytest.raises(FormatError, match=message):
            appender.append([*batch("w", 1), record])
        appender.append(batch("w", 2))
    assert contents(tmp_path) == {**expected("w", 1), **expected_batch("w", 2)}


def test_preallocation_grows_in_steps_and_a_clean_close_gives_back_what_is_unused(tmp_path: Path) -> None:
    step = 8192
    with writer(tmp_path, preallocation_step=step) as appender:
        appender.append(batch("w", 0))
        segment = only_segment(tmp_path)
        assert segment.stat().st_size == fmt.HEADER.size + step
        for number in range(1, 60):
            appender.append(batch("w", number))
            assert appender.position <= segment.stat().st_size <= appender.position + step, "at most one step ahead"
        data_end = appender.position
        assert data_end > 4 * step, "the workload should grow the segment several times"
    assert segment.stat().st_size == data_end, "a closed segment holds only its data"
    with writer(tmp_path, preallocation_step=step) as adopter:  # the slot's next writer allocates again and continues
        adopter.append(batch("w", 60))
        assert adopter.segment_id == segment_ids(tmp_path / "segments")[0]
        assert segment.stat().st_size > data_end
    assert contents(tmp_path) == expected("w", 61)
    assert segment.stat().st_size == open_segment(segment).end


def test_a_big_segment_left_by_a_dead_writer_is_sealed_by_its_adopter(tmp_path: Path) -> None:
    """Otherwise every open scans it whole until the slot's next clean close (0.8 s at 64 MiB of small commits)."""
    root = tmp_path / "store"
    code = "import os, sys, agentfs; agentfs.open(sys.argv[1]).run('r').commit({'blob': os.urandom(1_200_000)}); os._exit(0)"
    subprocess.run([sys.executable, "-c", code, str(root)], env=ENV, check=True, timeout=60)  # no close: as if killed
    (left,) = segment_ids(root / "segments")
    assert not peek(root / "segments" / fmt.segment_name(left))[1]
    with agentfs.open(root) as store:
        newest = store.run("r").commit({"after": True})
        assert peek(root / "segments" / fmt.segment_name(left))[1], "the adopter continued the big segment unsealed"
        location = store.engine.index.location(kinds.ENTRY, "r", newest.id)
        assert location is not None and location.segment_id != left
    with agentfs.open(root) as reopened:
        assert left in reopened.engine.index.footers
        latest = reopened.run("r").latest()
        assert latest is not None and (latest.id, latest.state) == (newest.id, {"after": True})
