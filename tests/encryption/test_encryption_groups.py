"""An encrypted store's GROUP records (docs/FORMAT.md, "Groups of records"): a batch's small records sealed together.

Each test reads records that lie in groups through every path that finds them (a scan of an unsealed segment,
a sealed segment's footer, compaction's copies, a clone), and damages or forges groups to see them refused
before anything inside is decompressed or parsed."""

from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path

import pytest

import agentfs
from agentfs.engine.record_groups import seal_batch
from agentfs.engine.segments import FrameLocation, open_segment, segment_ids
from agentfs.format import codec, groups, kinds
from agentfs.format import segment as fmt
from agentfs.format.crypto import Sealer
from agentfs.sync.pack_remote import PackRemote
from agentfs.sync.push import Pusher
from tests.encryption.test_encryption import PASSPHRASE, encryption
from tests.servers import make_file_spec

RUN = "agents/grouped"


def frame_kinds(root: Path) -> list[int]:
    """The kind of every record frame in the store's unsealed segments, as the bytes say (no group opened)."""
    segments = root / "segments"
    views = [open_segment(segments / fmt.segment_name(sid)) for sid in segment_ids(segments)]
    return [entry.kind for view in views if not view.sealed for entry in view.entries]


def commit_steps(store: agentfs.Store, count: int) -> None:
    run = store.run(RUN)
    for step in range(count):
        run.commit({"messages": [f"message {n} " * 20 for n in range(step + 1)], "step": step}, metadata={"step": step})
        run.journal.once(f"call-{step}", lambda step=step: {"result": step})


def check_reads_back(store: agentfs.Store, count: int, kept: int | None = None, *, verified: bool = True) -> None:
    """The run of `count` steps reads back whole (its newest `kept` checkpoints, after a prune)."""
    run = store.run(RUN)
    history = run.history()
    assert [cp.state["step"] for cp in history] == list(reversed(range(count)))[: kept or count]
    assert history[0].state["messages"][-1] == f"message {count - 1} " * 20
    assert run.journal.get(f"call-{count - 1}").result == {"result": count - 1}
    assert store.verify().ok or not verified


def test_grouped_records_read_back_from_a_scan_a_footer_compaction_and_a_clone(tmp_path: Path) -> None:
    root = tmp_path / "store"
    with agentfs.open(root, encryption=encryption()) as store:
        commit_steps(store, 6)
    found = frame_kinds(root)
    assert kinds.GROUP in found and kinds.ENTRY not in found, found  # each commit's small records lie in a group
    with agentfs.open(root, encryption=PASSPHRASE) as store:  # an unsealed segment: scanned, groups opened
        assert not store.engine.index.sealed_ids()
        check_reads_back(store, 6)
        store.engine.seal_for_compaction()
    with agentfs.open(root, encryption=PASSPHRASE) as store:  # sealed: found through the footer's rows
        assert store.engine.index.sealed_ids() and not frame_kinds(root)
        check_reads_back(store, 6)
        store.run(RUN).prune(keep_last=3)
        store.gc(grace=0)  # compaction copies the live records out of groups and groups them again
        check_reads_back(store, 6, kept=3)
        spec = make_file_spec(tmp_path)
        Pusher(store.engine, PackRemote(spec.url, spec.storage_options)).push()
    with agentfs.open(tmp_path / "clone", remote=spec.url, storage_options=spec.storage_options, encryption=PASSPHRASE) as clone:
        check_reads_back(clone, 6, kept=3)
        clone.run(RUN).commit({"messages": [], "step": 6})
    assert kinds.GROUP in frame_kinds(tmp_path / "clone")


def _group_frames(root: Path) -> list[tuple[Path, fmt.IndexEntry]]:
    segments = root / "segments"
    views = [open_segment(segments / fmt.segment_name(sid)) for sid in segment_ids(segments)]
    return [(view.path, entry) for view in views for entry in view.entries if entry.kind == kinds.GROUP]


def _flip(path: Path, entry: fmt.IndexEntry, position: int) -> None:
    """Flip one bit at `position` of the frame's payload, the frame's crc32 recomputed: damage only the seal sees."""
    data = bytearray(path.read_bytes())
    start = entry.offset
    data[start + fmt.FRAME.size + position] ^= 0x10
    length, _crc, kind = fmt.FRAME.unpack_from(data, start)
    crc = zlib.crc32(struct.pack(">I", length) + bytes((kind,)) + bytes(data[start + fmt.FRAME.size : start + entry.length]))
    struct.pack_into(">I", data, start + 4, crc)
    path.write_bytes(bytes(data))


def _no_decoding(monkeypatch: pytest.MonkeyPatch, offset: int) -> None:
    """Fail the test if anything parses a group's plaintext, or decompresses an object, at `offset` (the damaged group)."""
    parse, decompress = groups.decode_inner, codec.decode

    def parse_checked(data: bytes, where: str) -> list[groups.Member]:
        assert f"offset {offset}" not in where, f"the damaged group was parsed: {where}"
        return parse(data, where)

    def decompress_checked(blob: bytes, oid: bytes, where: str, *args: object) -> bytes:
        assert f"offset {offset}" not in where, f"an object of the damaged group was decompressed: {where}"
        return decompress(blob, oid, where, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(groups, "decode_inner", parse_checked)
    monkeypatch.setattr(codec, "decode", decompress_checked)


@pytest.mark.parametrize("where", ["nonce", "ciphertext", "tag"])
def test_a_flipped_bit_anywhere_in_a_group_is_refused_before_anything_inside_is_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    root = tmp_path / "store"
    with agentfs.open(root, encryption=encryption()) as store:
        commit_steps(store, 2)
        head = store.run(RUN).head_id()
        entry_location = store.engine.index.location(kinds.ENTRY, RUN, head)
    assert entry_location is not None
    path, group = next((p, e) for p, e in _group_frames(root) if e.offset == entry_location.offset)
    body_start = fmt.KEY_LENGTH.size  # the payload: key length, an empty key, then the sealed body
    body_length = group.length - fmt.FRAME.size - body_start
    position = {"nonce": body_start + 5, "ciphertext": body_start + body_length // 2, "tag": body_start + body_length - 3}[where]
    _flip(path, group, position)
    _no_decoding(monkeypatch, group.offset)
    with agentfs.open(root, encryption=PASSPHRASE) as store:  # the scan meets the group first: a damaged batch
        assert any("does not authenticate" in problem for problem in store.engine.index.problems), store.engine.index.problems
        with pytest.raises(agentfs.IntegrityError, match=rf"{path.name} offset {group.offset}: sealed record does not authenticate"):
            location = FrameLocation(entry_location.segment_id, group.offset, group.length)
            store.engine.index.read(location, kinds.ENTRY, kinds.pair_key(RUN, head))


def _forged(sealer: object, inner: bytes) -> bytes:
    return sealer.seal(kinds.GROUP, b"", inner)  # type: ignore[attr-defined, no-any-return]


def _member(kind: int, key: bytes, body: bytes) -> bytes:
    return struct.pack(">BH", kind, len(key)) + key + struct.pack(">I", len(body)) + body


ENTRY_KEY = kinds.pair_key(RUN, "01JD0000000000000000000000")
# each forged plaintext, and what the refusal says of it
GARBLED = {
    "no records": (struct.pack(">H", 0), "holds no record"),
    "cut short": (b"\x00", "cut short"),
    "an unknown kind": (struct.pack(">H", 1) + _member(99, ENTRY_KEY, b"x"), "kind 99, not one a group may hold"),
    "a group inside a group": (struct.pack(">H", 1) + _member(kinds.GROUP, b"", b"x"), "kind 21, not one a group may hold"),
    "a key past the end": (struct.pack(">H", 1) + struct.pack(">BH", kinds.ENTRY, 500) + ENTRY_KEY, "its key runs past"),
    "a body past the end": (struct.pack(">H", 1) + _member(kinds.ENTRY, ENTRY_KEY, b"x")[:-1], "runs past the group's end"),
    "a count past the records": (struct.pack(">H", 2) + _member(kinds.ENTRY, ENTRY_KEY, b"x"), "record 1 of its group runs past"),
    "bytes after the last record": (struct.pack(">H", 1) + _member(kinds.ENTRY, ENTRY_KEY, b"x") + b"junk", "4 bytes follow"),
    "a malformed run key": (struct.pack(">H", 1) + _member(kinds.ENTRY, b"../x\0notanid", b"x"), "record key"),
    "a short object id": (struct.pack(">H", 1) + _member(kinds.OBJECT, b"\1" * 31, b"x"), "31 bytes, not 32"),
    "a fork with a body": (struct.pack(">H", 1) + _member(kinds.FORK, b"a\0b", b"x"), "a fork body of 1 bytes"),
}


@pytest.mark.parametrize("garble", sorted(GARBLED))
def test_a_validly_sealed_group_with_a_garbled_inside_is_refused_naming_where(tmp_path: Path, garble: str) -> None:
    root = tmp_path / "store"
    with agentfs.open(root, encryption=encryption()) as store:
        commit_steps(store, 1)
        engine = store.engine
        assert engine.sealer is not None
        stored = engine.sealer.stored_key(kinds.ENTRY, ENTRY_KEY)
        inner, refusal = GARBLED[garble]
        record = fmt.Record(kinds.GROUP, b"", _forged(engine.sealer, inner))
        writer = engine._segment_writer()
        segment_id, _start, _end, entries = writer.append_batch([record], placed=[fmt.Placed(0, kinds.ENTRY, stored)])
        engine.index.add_batch(segment_id, _start, _end, entries)
        where = f"{fmt.segment_name(segment_id)} offset {entries[0].offset}"
        with pytest.raises(agentfs.FormatError, match=rf"{where}: .*{refusal}") as refused:
            engine.index.read(FrameLocation(segment_id, entries[0].offset, entries[0].length), kinds.ENTRY, ENTRY_KEY)
        assert "\n" not in str(refused.value)
    with agentfs.open(root, encryption=PASSPHRASE) as store:  # scanned again: that batch is damaged, the rest reads
        assert any(where in problem for problem in store.engine.index.problems), store.engine.index.problems
        check_reads_back(store, 1, verified=False)
        problems = store.verify().problems
        assert any(where in f"{problem}" for problem in problems), problems


def _set_encryption_format(root: Path, number: int) -> None:
    config = json.loads((root / "config").read_text())
    config["encryption"]["format"] = number
    (root / "config").write_text(json.dumps(config))


def test_an_unknown_encryption_format_is_refused_naming_it(tmp_path: Path) -> None:
    root = tmp_path / "store"
    with agentfs.open(root, encryption=encryption()) as store:
        assert store.engine.config["encryption"]["format"] == 2
        store.run(RUN).commit({"step": 0})
    _set_encryption_format(root, 3)
    with pytest.raises(agentfs.FormatError, match="encryption format 3 is not one this agentfs reads"):
        agentfs.open(root, encryption=PASSPHRASE)


def test_an_encryption_format_1_store_keeps_sealing_records_alone_and_its_remote_says_1(tmp_path: Path) -> None:
    """A store made before groups: read as before, never given groups (which its older readers would skip)."""
    root = tmp_path / "store"
    with agentfs.open(root, encryption=encryption()):
        pass
    _set_encryption_format(root, 1)
    with agentfs.open(root, encryption=PASSPHRASE) as store:
        commit_steps(store, 2)
        check_reads_back(store, 2)
        spec = make_file_spec(tmp_path)
        Pusher(store.engine, PackRemote(spec.url, spec.storage_options)).push()
    assert kinds.GROUP not in frame_kinds(root) and kinds.ENTRY in frame_kinds(root)
    remote_config = json.loads((Path(spec.url.removeprefix("file://")) / "config").read_text())
    assert remote_config["encryption"]["format"] == 1  # packs hold records sealed alone: older readers read them


def test_a_record_its_group_does_not_hold_is_an_integrity_error_naming_where_and_key(tmp_path: Path) -> None:
    """An index row (a footer's, a forged one) placing a record in a group that lacks it: refused, never another record."""
    with agentfs.open(tmp_path / "store", encryption=encryption()) as store:
        commit_steps(store, 1)
        head = store.run(RUN).head_id()
        assert head is not None
        location = store.engine.index.location(kinds.ENTRY, RUN, head)
        assert location is not None
        other = kinds.pair_key(RUN, "01JD0000000000000000000000")
        where = f"{fmt.segment_name(location.segment_id)} offset {location.offset}"
        with pytest.raises(agentfs.IntegrityError, match=rf"{where}: its group of records holds no entry record .*01JD0{{21}}"):
            store.engine.index.read(location, kinds.ENTRY, other)
        assert store.engine.index.read(location, kinds.ENTRY, kinds.pair_key(RUN, head)).key == kinds.pair_key(RUN, head)


def test_a_batch_is_sealed_in_the_groups_its_plan_makes(tmp_path: Path) -> None:
    """seal_batch: small records that fit one group are that group (found without planning, the usual commit), as
    plan() would make them; past GROUP_TARGET they go in several; a large record is sealed alone. Each record's place
    names the frame holding it, and each group opens to its records' plain keys and bodies, in order."""
    sealer = Sealer(bytes(range(32)))
    key = kinds.pair_key("runs/a", "01J0000000000000000000000A")

    def batch(*sizes: int) -> list[fmt.Record]:
        return [fmt.Record(kinds.ENTRY, key, bytes([n]) * size) for n, size in enumerate(sizes)]

    for records, expected_frames in [
        (batch(100, 2_000, 16 << 10), [[0, 1, 2]]),  # one group
        (batch(*[15 << 10] * 5), [[0, 1, 2, 3], [4]]),  # past GROUP_TARGET: two
        (batch(100, 17 << 10, 200), [[0, 2], None]),  # the large one alone, after the group it follows
    ]:
        frames, placed = seal_batch(sealer, records)
        sizes = [groups.member_size(r.key, r.body) if len(r.body) <= groups.SMALL_MEMBER else -1 for r in records]
        assert [frame.kind for frame in frames] == [kinds.GROUP if want is not None else kinds.ENTRY for want in expected_frames]
        assert [want for want in expected_frames if want is not None] == groups.plan(sizes)
        for number, want in enumerate(expected_frames):
            if want is None:
                continue
            members = sealer.open_group(frames[number].key, frames[number].body, "test")
            assert [(m.kind, bytes(m.key), bytes(m.body)) for m in members] == [(records[i].kind, key, records[i].body) for i in want]
            assert all(placed[i].frame == number for i in want)
        assert [p.key for p in placed] == [sealer.stored_key(kinds.ENTRY, key)] * len(records)
