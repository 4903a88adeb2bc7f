"""A flipped, truncated, emptied or missing object or log entry is never returned as data.

Reading what it belongs to raises a clear agentfs error naming it, `verify()` names it, and whatever does not
depend on it still loads.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import msgpack
import pytest
import zstandard

import agentfs
from tests.helpers import raw
from tests.helpers.raw import flipped

HEADER = 5  # "AFO" + version + codec
ENTRY_HEADER = 4 + 32  # "AFL" + version + sha256(body)


@dataclass
class Corpus:
    root: Path
    run: str
    state_id: str  # a checkpoint whose state has a chunked (tree) value
    artifact_id: str  # a checkpoint with a random (raw-stored) and a text (zstd) chunked artifact
    state: dict[str, object]
    artifacts: dict[str, bytes]
    state_objects: set[bytes]
    artifact_objects: set[bytes]
    tree_nodes: set[bytes]


def is_tree_node(root: Path, oid: bytes) -> bool:
    """Whether an object holds a tree node ([[oid, size], ...]), read by the documented format."""
    blob = raw.object_bytes(root, oid)
    data = zstandard.ZstdDecompressor().decompressobj().decompress(blob[HEADER:]) if blob[4] == 1 else blob[HEADER:]
    try:
        node = msgpack.unpackb(data)
    except Exception:
        return False
    return isinstance(node, list) and all(isinstance(c, list) and len(c) == 2 and isinstance(c[0], bytes) and len(c[0]) == 32 for c in node)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Corpus:
    root = tmp_path_factory.mktemp("corruption") / ".agentfs"
    rng = random.Random(6)
    words = ["".join(rng.choice("abcdefghijklmnop") for _ in range(rng.randint(2, 9))) for _ in range(1000)]
    text = " ".join(rng.choice(words) for _ in range(40_000))
    state: dict[str, object] = {"big": [text[i : i + 500] for i in range(0, len(text), 500)], "small": 1}
    artifacts = {"rand.bin": rng.randbytes(1_000_000), "text.txt": (text * 4).encode()}
    with agentfs.open(root, durability="process") as store:  # what is tested is reading, not fsync
        run = store.run("r")
        state_cp = run.commit(state)
        state_objects = raw.object_ids(root)
        artifact_cp = run.commit({"n": 2}, artifacts=artifacts)
        artifact_objects = raw.object_ids(root) - state_objects
        assert store.verify().ok
    # the corpus covers both codecs and tree nodes as well as chunks
    codecs = {raw.object_bytes(root, oid)[4] for oid in state_objects | artifact_objects}
    assert codecs == {0, 1}
    assert len(state_objects) > 10 and len(artifact_objects) > 10
    tree_nodes = {oid for oid in state_objects | artifact_objects if is_tree_node(root, oid)}
    assert len(tree_nodes) >= 3  # the state's tree has inner nodes, each artifact a root
    return Corpus(root, "r", state_cp.id, artifact_cp.id, state, artifacts, state_objects, artifact_objects, tree_nodes)


def read_state(corpus: Corpus) -> object:
    with agentfs.open(corpus.root) as store:
        return store.run(corpus.run).get(corpus.state_id).state


def read_artifacts(corpus: Corpus) -> dict[str, bytes]:
    with agentfs.open(corpus.root) as store:
        cp = store.run(corpus.run).get(corpus.artifact_id)
        return {name: cp.artifacts[name].read_bytes() for name in cp.artifacts}


def verify_problems(corpus: Corpus) -> list[str]:
    with agentfs.open(corpus.root) as store:
        report = store.verify()
    assert report.ok is (not report.problems)
    return [str(p) for p in report.problems]


@pytest.fixture
def damage(corpus: Corpus) -> Iterator[Callable[[bytes, bytes | None], None]]:
    """Replace an object's stored bytes (None: lose it); every damaged object is restored at teardown."""
    saved: dict[bytes, bytes] = {}

    def apply(oid: bytes, data: bytes | None) -> None:
        if oid not in saved:
            saved[oid] = raw.object_bytes(corpus.root, oid)
        if data is None:
            raw.delete_object(corpus.root, oid)
        else:
            raw.set_object_bytes(corpus.root, oid, data)

    yield apply
    for oid, data in saved.items():
        raw.set_object_bytes(corpus.root, oid, data)
    assert verify_problems(corpus) == []


def check_damaged_object(
    corpus: Corpus, damaged: bytes, *, allow_format: bool = False, missing: bool = False, thorough: bool = True
) -> None:
    """Reading what uses the object fails naming its id; with `thorough`, the rest loads and verify names it."""
    oid = damaged.hex()
    expected: tuple[type[Exception], ...] = (agentfs.IntegrityError,)
    if allow_format:
        expected += (agentfs.FormatError,)
    if missing:
        expected = (agentfs.NotFound,)
    uses, other, other_value = (
        (read_state, read_artifacts, corpus.artifacts) if damaged in corpus.state_objects else (read_artifacts, read_state, corpus.state)
    )
    with pytest.raises(expected) as info:
        uses(corpus)
    assert isinstance(info.value, agentfs.AgentFSError)
    assert oid in str(info.value), f"{info.value} does not name object {oid}"
    if thorough:
        assert other(corpus) == other_value
        problems = verify_problems(corpus)
        assert any(oid in problem for problem in problems), f"verify did not name {oid}: {problems}"


def test_flipping_one_byte_of_any_object_is_detected(corpus: Corpus, damage: Callable[[bytes, bytes | None], None]) -> None:
    """Every object file at its middle byte; every third one also at its first body byte and its last byte.

    (All header bytes: see the next test.)
    """
    for index, oid in enumerate(sorted(corpus.state_objects | corpus.artifact_objects)):
        original = raw.object_bytes(corpus.root, oid)
        for position in sorted({HEADER, len(original) - 1}) if index % 3 == 0 else []:
            damage(oid, flipped(original, position))
            check_damaged_object(corpus, oid, thorough=False)
        damage(oid, flipped(original, len(original) // 2))
        check_damaged_object(corpus, oid)
        damage(oid, original)


def test_flipping_any_single_bit_of_a_small_object_is_detected(corpus: Corpus, damage: Callable[[bytes, bytes | None], None]) -> None:
    """Every position of the smallest object of each codec, one bit at a time, header included.

    Bytes 3 and 4 are the format version and the codec: a FormatError naming the object is accepted there.
    """
    smallest = {}
    for oid in sorted(corpus.state_objects | corpus.artifact_objects, key=lambda oid: len(raw.object_bytes(corpus.root, oid))):
        smallest.setdefault(raw.object_bytes(corpus.root, oid)[4], oid)
    assert set(smallest) == {0, 1}
    for oid in smallest.values():
        original = raw.object_bytes(corpus.root, oid)
        for position in range(len(original)):
            damage(oid, original[:position] + bytes([original[position] ^ (1 << (position % 8))]) + original[position + 1 :])
            check_damaged_object(corpus, oid, allow_format=position in (3, 4), thorough=position in (0, 3, 4))
        damage(oid, original)


@pytest.mark.parametrize("cut", ["half", "header", "short", "empty", "one_less"])
def test_truncated_or_empty_object_is_detected(corpus: Corpus, damage: Callable[[bytes, bytes | None], None], cut: str) -> None:
    everything = sorted(corpus.state_objects | corpus.artifact_objects)
    sample = [p for i, p in enumerate(everything) if i % 3 == 0 or p in corpus.tree_nodes]  # every tree node, a third of the chunks
    for index, oid in enumerate(sample):
        original = raw.object_bytes(corpus.root, oid)
        size = {"half": len(original) // 2, "header": HEADER, "short": 3, "empty": 0, "one_less": len(original) - 1}[cut]
        damage(oid, original[:size])
        check_damaged_object(corpus, oid, thorough=index % 3 == 0)
        if cut == "empty" and index % 3 == 0:
            with agentfs.open(corpus.root) as store:
                kinds = [p.kind for p in store.verify().problems if oid.hex() in str(p)]
            assert "empty" in kinds, kinds
        damage(oid, original)


def test_missing_object_is_reported(corpus: Corpus, damage: Callable[[bytes, bytes | None], None]) -> None:
    everything = sorted(corpus.state_objects | corpus.artifact_objects)
    for oid in [p for i, p in enumerate(everything) if i % 5 == 0 or p in corpus.tree_nodes]:
        original = raw.object_bytes(corpus.root, oid)
        damage(oid, None)
        check_damaged_object(corpus, oid, missing=True)
        damage(oid, original)


def test_corrupt_artifact_is_never_streamed_or_saved(corpus: Corpus, damage: Callable[[bytes, bytes | None], None], tmp_path: Path) -> None:
    """open() may yield good leading bytes, then raises; save() leaves no file behind."""
    with agentfs.open(corpus.root) as store:
        cp = store.run(corpus.run).get(corpus.artifact_id)
        for name in corpus.artifacts:
            ref_objects = sorted(corpus.artifact_objects)
            for oid in ref_objects:
                original = raw.object_bytes(corpus.root, oid)
                damage(oid, flipped(original, len(original) // 2))
                artifact = cp.artifacts[name]
                try:
                    good = artifact.read_bytes()
                except agentfs.IntegrityError:
                    good = None
                if good is not None:  # this object belongs to the other artifact
                    assert good == corpus.artifacts[name]
                    damage(oid, original)
                    continue
                received = b""
                with pytest.raises(agentfs.IntegrityError), artifact.open() as stream:
                    while chunk := stream.read(4096):
                        received += chunk
                assert corpus.artifacts[name].startswith(received)
                target = tmp_path / "out" / name
                target.parent.mkdir(exist_ok=True)
                with pytest.raises(agentfs.IntegrityError):
                    artifact.save(target)
                assert list(target.parent.iterdir()) == []
                damage(oid, original)


# --- log entries ----------------------------------------------------------------------------------------


@pytest.fixture
def log_store(tmp_path: Path) -> Iterator[tuple[Path, list[agentfs.Checkpoint]]]:
    """Three checkpoints whose keys all change each step: none depends on another's entry."""
    root = tmp_path / ".agentfs"
    with agentfs.open(root, durability="process") as store:
        run = store.run("team/logs")
        cps = [
            run.commit({"i": i, "packed": os.urandom(2000), "blob": os.urandom(40_000)}, artifacts={"a.txt": os.urandom(3000)})
            for i in range(3)
        ]
        assert store.verify().ok
    yield root, cps


@pytest.mark.parametrize(
    "where", ["magic", "version", "checksum", "body_start", "body_middle", "last", "truncated", "empty", "header_only"]
)
def test_corrupt_log_entry_is_detected(log_store: tuple[Path, list[agentfs.Checkpoint]], where: str) -> None:
    root, cps = log_store
    target = cps[1]
    original = raw.record_bytes(root, "team/logs", raw.LOG_RECORDS, target.id)
    assert original[:4] == b"AFL\x02"
    damaged = {
        "magic": lambda: flipped(original, 0),
        "version": lambda: flipped(original, 3),
        "checksum": lambda: flipped(original, 10),
        "body_start": lambda: flipped(original, ENTRY_HEADER),
        "body_middle": lambda: flipped(original, (ENTRY_HEADER + len(original)) // 2),
        "last": lambda: flipped(original, len(original) - 1),
        "truncated": lambda: original[: len(original) // 2],
        "empty": lambda: b"",
        "header_only": lambda: original[:ENTRY_HEADER],
    }[where]()
    raw.set_record_bytes(root, "team/logs", raw.LOG_RECORDS, target.id, damaged)
    expected = (agentfs.IntegrityError, agentfs.FormatError) if where == "version" else agentfs.IntegrityError
    with agentfs.open(root) as store:
        run = store.run("team/logs")
        with pytest.raises(expected) as info:
            run.get(target.id).state  # noqa: B018
        assert "team/logs" in str(info.value) and target.id in str(info.value)
        for other in (cps[0], cps[2]):
            cp = run.get(other.id)
            assert cp.state["i"] == other.state["i"] and cp.state["packed"] == other.state["packed"]
            assert cp.artifacts["a.txt"].read_bytes() == other.artifacts["a.txt"].read_bytes()
        assert run.latest().id == cps[2].id
        report = store.verify()
    assert not report.ok
    assert any(target.id in str(p) and "team/logs" in str(p) for p in report.problems), report
    assert all(target.id in str(p) for p in report.problems), report
    raw.set_record_bytes(root, "team/logs", raw.LOG_RECORDS, target.id, original)
    with agentfs.open(root) as store:
        assert store.verify().ok
        assert store.run("team/logs").get(target.id).state == target.state


def test_corrupt_entry_breaks_only_the_checkpoints_that_reuse_it(tmp_path: Path) -> None:
    """An unchanged packed key is reused from the entry that first packed it; corrupting that entry is reported for both."""
    root = tmp_path / ".agentfs"
    shared = os.urandom(3000)
    with agentfs.open(root) as store:
        run = store.run("r")
        first = run.commit({"shared": shared, "i": 0})
        second = run.commit({"shared": shared, "i": 1})
        third = run.commit({"shared": os.urandom(3000), "i": 2})
    raw.set_record_bytes(root, "r", raw.LOG_RECORDS, first.id, flipped(raw.record_bytes(root, "r", raw.LOG_RECORDS, first.id), 50))
    with agentfs.open(root) as store:
        run = store.run("r")
        with pytest.raises(agentfs.IntegrityError) as info:
            run.get(second.id).state  # noqa: B018
        assert first.id in str(info.value)
        assert run.get(third.id).state["i"] == 2
        problems = [str(p) for p in store.verify().problems]
    assert any(first.id in p for p in problems)
    assert any(second.id in p for p in problems), problems
