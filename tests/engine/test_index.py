"""The in-memory segment index on its own (agentfs/engine/index.py): real segment files, real writer processes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from agentfs.engine.index import Index
from agentfs.engine.segment_writer import SegmentWriter
from agentfs.format import kinds
from agentfs.format import segment as fmt
from agentfs.format.retirement import Retirement, encode_retirement
from agentfs.ids import new_id

REPO = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
pytestmark = pytest.mark.timeout(60)

WRITER = """
import sys
from pathlib import Path
from agentfs.engine.segment_writer import SegmentWriter
from agentfs.format import kinds
from agentfs.format.segment import Record
root, run, count = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
from agentfs.ids import new_id
with SegmentWriter(root / "segments", root / "locks", durability="process", segment_bytes=8192) as writer:
    for number in range(count):
        checkpoint_id = new_id()
        oid = number.to_bytes(2, "big") + run.encode().ljust(30, b"-")[:30]
        writer.append([Record(kinds.OBJECT, oid, b"blob"), Record(kinds.ENTRY, kinds.pair_key(run, checkpoint_id), b"entry")])
        print(checkpoint_id, flush=True)
"""


def entry(run: str, checkpoint_id: str, body: bytes = b"entry") -> fmt.Record:
    return fmt.Record(kinds.ENTRY, kinds.pair_key(run, checkpoint_id), body)


def writer(root: Path, **options: object) -> SegmentWriter:
    return SegmentWriter(root / "segments", root / "locks", durability="process", **options)  # type: ignore[arg-type]


def bytes_read() -> int:
    return int(Path("/proc/self/io").read_text().split("rchar:")[1].split()[0])


def test_several_writer_processes_are_indexed_with_heads_and_refresh_sees_new_ones(tmp_path: Path) -> None:
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path), f"run{n}", "30"], env=ENV, stdout=subprocess.PIPE, text=True)
        for n in range(3)
    ]
    written = {f"run{n}": proc.communicate(timeout=30)[0].split() for n, proc in enumerate(procs)}
    index = Index(tmp_path / "segments")
    assert index.problems == []
    assert len(index.segments) > 1, "the writers should have rolled over, so sealed and unsealed segments are both read"
    for run, ids in written.items():
        assert index.ids(kinds.ENTRY, run) == sorted(ids)
        assert index.head(run) == max(ids)
        assert index.read(index.location(kinds.ENTRY, run, ids[0])).body == b"entry"  # type: ignore[arg-type]
    assert len(index.object_ids()) == 90
    more = subprocess.run([sys.executable, "-c", WRITER, str(tmp_path), "run0", "2"], env=ENV, capture_output=True, text=True, check=True)
    assert index.head("run0") == max(written["run0"]), "nothing new is seen before refresh"
    index.refresh()
    assert index.head("run0") == max(more.stdout.split())
    assert len(index.ids(kinds.ENTRY, "run0")) == 32


def test_a_torn_tail_is_not_indexed_and_the_adopters_batch_is(tmp_path: Path) -> None:
    with writer(tmp_path) as appender:
        first = new_id()
        appender.append([entry("r", first)])
        start, segment_id = appender.position, appender.segment_id
    torn, _ = fmt.encode_batch(segment_id, start, [entry("r", new_id())])
    path = tmp_path / "segments" / fmt.segment_name(segment_id)
    fd = os.open(path, os.O_WRONLY)
    os.pwrite(fd, torn[: len(torn) // 2], start)
    os.close(fd)
    index = Index(tmp_path / "segments")
    assert index.ids(kinds.ENTRY, "r") == [first] and index.problems == []
    index.refresh()  # the torn bytes at the known end are not a batch: nothing to index, nothing reported
    assert index.ids(kinds.ENTRY, "r") == [first] and index.problems == []
    with writer(tmp_path) as adopter:
        second = new_id()
        adopter.append([entry("r", second)])
    index.refresh()
    assert index.ids(kinds.ENTRY, "r") == [first, second]


def test_a_damaged_batch_is_reported_and_hides_nothing_else(tmp_path: Path) -> None:
    ids = [new_id() for _ in range(3)]
    with writer(tmp_path) as appender:
        locations = [appender.append([entry("r", checkpoint_id)])[0] for checkpoint_id in ids]
    path = tmp_path / "segments" / fmt.segment_name(locations[1].segment_id)
    data = bytearray(path.read_bytes())
    data[locations[1].offset + locations[1].length - 2] ^= 0x10
    path.write_bytes(bytes(data))
    index = Index(tmp_path / "segments")
    assert index.ids(kinds.ENTRY, "r") == [ids[0], ids[2]]
    assert len(index.problems) == 1 and str(path) in index.problems[0]


def test_retirement_hides_what_it_names_in_any_segment_order(tmp_path: Path) -> None:
    ids = [new_id() for _ in range(3)]
    journal_id = new_id()
    retirement = Retirement("r", new_id(), 0, ids[:2], [journal_id])
    record = fmt.Record(kinds.RETIRED, kinds.pair_key("r", retirement.id), encode_retirement(retirement, {}))
    with writer(tmp_path) as appender:
        appender.append([record])  # the retirement lies in an older segment than what it names
        appender.seal()
        appender.append([entry("r", i) for i in ids] + [fmt.Record(kinds.JOURNAL, kinds.pair_key("r", journal_id), b"j")])
    index = Index(tmp_path / "segments")
    assert index.ids(kinds.ENTRY, "r") == [ids[2]] and index.head("r") == ids[2]
    assert index.ids(kinds.JOURNAL, "r") == []
    assert index.ids(kinds.RETIRED, "r") == [retirement.id]
    with writer(tmp_path) as appender:
        later = Retirement("r", new_id(), 0, [ids[2]], [])
        appender.append([fmt.Record(kinds.RETIRED, kinds.pair_key("r", later.id), encode_retirement(later, {}))])
    index.refresh()
    assert index.head("r") is None and index.runs(kinds.ENTRY) == []


def test_forks_and_malformed_keys(tmp_path: Path) -> None:
    with writer(tmp_path) as appender:
        appender.append([fmt.Record(kinds.FORK, kinds.pair_key("a", "b"), b""), fmt.Record(kinds.ENTRY, b"no-nul", b"x")])
    index = Index(tmp_path / "segments")
    assert index.forks == {"a": {"b"}}
    assert len(index.problems) == 1 and "is not two names joined by NUL" in index.problems[0]


def test_refresh_reads_only_what_is_new_and_rebuilds_when_a_segment_vanishes(tmp_path: Path) -> None:
    with writer(tmp_path) as appender:
        for _ in range(2000):
            appender.append([entry("r", new_id(), os.urandom(200))])
        index = Index(tmp_path / "segments")
        before = bytes_read()
        index.refresh()
        idle = bytes_read() - before
        appender.append([entry("r", new_id(), os.urandom(200))])
        before = bytes_read()
        index.refresh()
        one_batch = bytes_read() - before
        appender.seal()
    segment_bytes = sum(p.stat().st_size for p in (tmp_path / "segments").iterdir())
    assert idle < 200, f"an idle refresh read {idle} bytes"
    assert one_batch < 4096, f"a refresh after one batch read {one_batch} bytes of a {segment_bytes}-byte store"
    assert len(index.ids(kinds.ENTRY, "r")) == 2001
    (only,) = index.segments
    with writer(tmp_path) as appender:
        appender.seal()  # the next append starts a new segment
        kept = new_id()
        appender.append([entry("r", kept)])
    index.refresh()
    generation = index.generation
    os.unlink(tmp_path / "segments" / fmt.segment_name(only))  # what compaction does once it copied the live records
    index.refresh()
    assert index.generation == generation + 1 and index.ids(kinds.ENTRY, "r") == [kept]


def test_id_slice_follows_sealed_segments_other_writers_an_older_id_a_copy_and_retirement(tmp_path: Path) -> None:
    """Index.id_slice keeps each run's ids sorted once (its first call) and up to date after: appended, inserted, hidden."""
    ids = sorted(new_id() for _ in range(40))
    with writer(tmp_path) as appender:
        appender.append([entry("run0", checkpoint_id) for checkpoint_id in ids[:30]])
        appender.seal()
        appender.append([entry("run0", checkpoint_id) for checkpoint_id in ids[30:]])
    index = Index(tmp_path / "segments")
    assert len(index.footers) == 1 and len(index.segments) == 2, "a footer and an unsealed segment are both read"

    def check(expected: list[str]) -> None:
        for start, stop in [(None, None), (0, 1), (-5, None), (10, 20), (-100, -30), (len(expected) - 2, 100)]:
            window = index.id_slice(kinds.ENTRY, "run0", start, stop)
            assert window == (len(expected), slice(start, stop).indices(len(expected))[0], expected[start:stop])
        assert index.ids(kinds.ENTRY, "run0") == expected

    check(ids)
    more = subprocess.run([sys.executable, "-c", WRITER, str(tmp_path), "run0", "3"], env=ENV, capture_output=True, text=True, check=True)
    index.refresh()
    ids += more.stdout.split()
    check(ids)
    older = "0" * 10 + ids[0][10:]  # older than every id: what a pull of another machine's checkpoint inserts
    with writer(tmp_path) as appender:
        appender.append([entry("run0", older), entry("run0", ids[3])])  # and a second copy of a sealed one
    index.refresh()
    ids.insert(0, older)
    check(ids)
    sealed = sorted(new_id() for _ in range(2))
    with writer(tmp_path) as appender:  # a segment sealed before this index lists it: read through its footer
        appender.seal()
        appender.append([entry("run0", checkpoint_id) for checkpoint_id in sealed])
        appender.seal()
    index.refresh()
    assert len(index.footers) >= 2
    ids += sealed
    check(ids)
    retirement = Retirement("run0", new_id(), 0, [ids[1], ids[-1]], [])
    with writer(tmp_path) as appender:
        appender.append([fmt.Record(kinds.RETIRED, kinds.pair_key("run0", retirement.id), encode_retirement(retirement, {}))])
    index.refresh()
    check([checkpoint_id for checkpoint_id in ids if checkpoint_id not in (ids[1], ids[-1])])
