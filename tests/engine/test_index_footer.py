"""Sealed segments read through their footers in place (format/footer.py, engine/index.py): lookups
bisect the footer's rows, and open + latest() decodes a few rows, not the footer."""

from __future__ import annotations

import hashlib
import math
import os
import random
from collections.abc import Callable
from pathlib import Path

import pytest

import agentfs
from agentfs.engine.index import Index
from agentfs.engine.segment_writer import SegmentWriter
from agentfs.errors import FormatError, IntegrityError
from agentfs.format import codec, kinds
from agentfs.format import footer as footer_format
from agentfs.format import segment as fmt
from agentfs.format.retirement import Retirement, encode_retirement
from agentfs.ids import new_id

pytestmark = pytest.mark.timeout(120)


def writer(root: Path) -> SegmentWriter:
    return SegmentWriter(root / "segments", root / "locks", durability="process")


def entry(run: str, checkpoint_id: str, body: bytes = b"entry") -> fmt.Record:
    return fmt.Record(kinds.ENTRY, kinds.pair_key(run, checkpoint_id), body)


def retirement(run: str, checkpoints: list[str], journal: list[str] | None = None) -> fmt.Record:
    record = Retirement(run, new_id(), 0, checkpoints, journal or [])
    return fmt.Record(kinds.RETIRED, kinds.pair_key(run, record.id), encode_retirement(record, {}))


def test_open_and_latest_of_object_backed_states_decode_a_few_footer_rows(tmp_path: Path) -> None:
    count = 1500
    rng = random.Random(7)
    with agentfs.open(tmp_path / "store", durability="process") as store:
        run = store.run("agent")
        for step in range(count):  # 20 KB of random bytes: chunked into objects, not packed into the entry
            run.commit({"step": step, "blob": rng.randbytes(20_000)})
    with agentfs.open(tmp_path / "store") as store:
        assert store.engine.index.footers, "the store's segment should be sealed at close, so its footer is read"
        rows = sum(f.objects.row_count + sum(s.row_count for s in f.runs.values()) for f in store.engine.index.footers.values())
        assert rows > 5 * count, "the states should be stored as several objects each"
        opened = store.engine.index.rows_read()
        latest = store.run("agent").latest()
        assert latest is not None and latest.state["step"] == count - 1
        assert len(latest.state["blob"]) == 20_000
        read = store.engine.index.rows_read()
    bound = 2 * math.log2(rows) + 4  # one bisection and the rows equal to its key
    assert opened <= 2, f"opening decoded {opened} footer rows"
    assert read < 16 * bound < rows / 10, f"open + latest() decoded {read} of {rows} footer rows"


def test_copies_in_sealed_segments_are_found_when_the_first_is_damaged(tmp_path: Path) -> None:
    good = codec.encode(b"the object's bytes")
    oid = hashlib.sha256(b"the object's bytes").digest()
    bad = good[:-1] + bytes([good[-1] ^ 1])  # an intact frame around bytes that do not decode
    checkpoint_id = new_id()
    with writer(tmp_path) as appender:
        appender.append([fmt.Record(kinds.OBJECT, oid, bad), entry("r", checkpoint_id, b"first")])
        appender.seal()
        appender.append([fmt.Record(kinds.OBJECT, oid, good), entry("r", checkpoint_id, b"second")])
        appender.seal()
    index = Index(tmp_path / "segments")
    assert len(index.footers) == 2 and not index.objects, "both segments are sealed: nothing is indexed record by record"
    first = index.object_location(oid)
    assert first is not None and index.read(first).body == bad
    assert index.read_body(kinds.OBJECT, oid, first, lambda body: codec.decode(body, oid, "test")) == good
    location = index.location(kinds.ENTRY, "r", checkpoint_id)
    assert location is not None
    assert index.read_body(kinds.ENTRY, kinds.pair_key("r", checkpoint_id), location, only(b"second")) == b"second"


def only(expected: bytes) -> Callable[[bytes], None]:
    """A check that takes `expected` alone, as an entry's decoding takes only its sound copy."""

    def check(body: bytes) -> None:
        if body != expected:
            raise IntegrityError(f"{body!r} is not {expected!r}")

    return check


def test_retirement_in_a_sealed_segment_hides_the_head_of_another_and_the_head_walks_back(tmp_path: Path) -> None:
    ids = sorted(new_id() for _ in range(5))
    with writer(tmp_path) as appender:
        appender.append([entry("r", i) for i in ids] + [entry("other", new_id())])
        appender.seal()
        appender.append([retirement("r", ids[2:])])  # the three newest
        appender.seal()
    index = Index(tmp_path / "segments")
    assert index.head("r") == ids[1] and index.ids(kinds.ENTRY, "r") == ids[:2]
    assert not index.has(kinds.ENTRY, "r", ids[4]) and index.location(kinds.ENTRY, "r", ids[4]) is None
    assert index.has(kinds.ENTRY, "r", ids[0]) and index.runs(kinds.ENTRY) == ["other", "r"]
    with writer(tmp_path) as appender:
        appender.append([retirement("r", ids[:2])])
        appender.seal()
    index.refresh()
    assert index.head("r") is None and index.runs(kinds.ENTRY) == ["other"] and index.ids(kinds.ENTRY, "r") == []


def test_malformed_keys_and_forks_in_a_sealed_segment_are_found_at_open(tmp_path: Path) -> None:
    with writer(tmp_path) as appender:
        appender.append(
            [
                fmt.Record(kinds.FORK, kinds.pair_key("a", "b"), b""),
                fmt.Record(kinds.ENTRY, b"no-nul", b"x"),
                fmt.Record(kinds.JOURNAL, kinds.pair_key("r", "not-a-ulid"), b"x"),
                fmt.Record(kinds.OBJECT, b"short", b"x"),
            ]
        )
        appender.seal()
    index = Index(tmp_path / "segments")
    assert index.footers and index.forks == {"a": {"b"}}
    assert len(index.problems) == 3, index.problems
    assert index.runs(kinds.ENTRY) == [] and index.runs(kinds.JOURNAL) == [] and index.object_ids() == []


def test_a_damaged_footer_row_raises_when_read_and_audit_scans_the_segment_instead(tmp_path: Path) -> None:
    kept, beyond_id = new_id(), new_id()
    batch, (real,) = fmt.encode_batch(1, fmt.HEADER.size, [entry("r", kept)])
    end = fmt.HEADER.size + len(batch)
    beyond = fmt.IndexEntry(kinds.ENTRY, kinds.pair_key("r", beyond_id), end, 40)  # a row naming bytes past the records
    (tmp_path / "segments").mkdir()
    path = tmp_path / "segments" / fmt.segment_name(1)
    path.write_bytes(fmt.encode_header(1, 0, os.urandom(16)) + batch + fmt.encode_seal(1, end, [real, beyond]))
    index = Index(tmp_path / "segments")
    assert index.problems == [] and index.footers, "the footer's head and run table are sound: it is used in place"
    with pytest.raises(IntegrityError, match=str(path)):
        index.location(kinds.ENTRY, "r", beyond_id)
    index.audit()
    assert len(index.problems) == 1 and str(path) in index.problems[0] and not index.footers
    assert index.ids(kinds.ENTRY, "r") == [kept] and index.head("r") == kept


def test_a_footer_is_refused_at_open_unless_its_sections_add_up(tmp_path: Path) -> None:
    batch, entries = fmt.encode_batch(1, fmt.HEADER.size, [entry("r", new_id()), entry("q", new_id())])
    end = fmt.HEADER.size + len(batch)
    seal = fmt.encode_seal(1, end, entries)
    _kind, payload = fmt.decode_frame(seal[: -fmt.TRAILER.size], "test")
    footer_format.Footer(payload, 1, fmt.HEADER.size, end, "test")  # sound
    with pytest.raises(FormatError, match="sections take"):
        footer_format.Footer(payload + b"x", 1, fmt.HEADER.size, end, "test")
    with pytest.raises(FormatError, match="segment 1's, not 2's"):
        footer_format.Footer(payload, 2, fmt.HEADER.size, end, "test")
    sections = footer_format.HEAD.size  # no objects: the run table follows the head; (ENTRY, "q") sorts before (ENTRY, "r")
    swapped = payload[:sections] + payload[sections + 8 : sections + 16] + payload[sections : sections + 8] + payload[sections + 16 :]
    with pytest.raises(FormatError, match="out of order"):
        footer_format.Footer(swapped, 1, fmt.HEADER.size, end, "test")


def test_every_entry_comes_back_from_the_footer_by_offset(tmp_path: Path) -> None:
    oid = os.urandom(32)
    records = [
        fmt.Record(kinds.OBJECT, oid, b"o"),
        entry("r", new_id()),
        fmt.Record(kinds.FORK, kinds.pair_key("r", "s"), b""),
        fmt.Record(kinds.JOURNAL, kinds.pair_key("r", new_id()), b"j"),
        fmt.Record(kinds.OBJECT, oid, b"o"),  # a second copy in the same segment
        fmt.Record(99, b"a newer writer's kind", b""),
        fmt.Record(kinds.ENTRY, b"no-nul", b""),
    ]
    batch, entries = fmt.encode_batch(5, fmt.HEADER.size, records)
    end = fmt.HEADER.size + len(batch)
    seal = fmt.encode_seal(5, end, entries)
    assert fmt.decode_footer(seal[: -fmt.TRAILER.size], 5, end, "test") == entries
    footer = fmt.read_footer(seal[: -fmt.TRAILER.size], 5, end, "test")
    assert footer.find_object(oid) == [(entries[0].offset, entries[0].length), (entries[4].offset, entries[4].length)]
    assert [e.kind for e in footer.others] == [kinds.FORK, 99, kinds.ENTRY]
