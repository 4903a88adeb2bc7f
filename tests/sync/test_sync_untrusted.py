"""The remote is untrusted.

Tampered objects, log entries naming paths outside the store, malformed manifests and over-large keys
are each refused with a clear agentfs error; nothing is written outside the store; bad bytes never
enter the local store; and the rest of the store keeps working. Runs on file://, memory:// and S3
(moto); the GCS emulator adds nothing here that S3 does not cover and is slow.
"""

from __future__ import annotations

import dataclasses
import os
import posixpath
import random
from pathlib import Path
from typing import Any

import msgpack
import pytest

import agentfs
import agentfs.sync.pack_remote as pack_remote
from agentfs.format import codec, keys, kinds
from agentfs.format.entries import Entry, encode_entry
from agentfs.format.manifest import encode_value_ref
from agentfs.format.pack import encode_head
from agentfs.format.refs import LOOSE, PACKED, TREE, InlineRef, LooseRef, TreeRef
from agentfs.ids import new_id
from agentfs.sync.pack_remote import PackRemote
from agentfs.sync.pull import pull
from agentfs.sync.push import Pusher
from tests.helpers import raw, remote_raw
from tests.helpers.format1_entry import format1_entry
from tests.servers import RemoteSpec

pytestmark = pytest.mark.parametrize("remote", ["file", "memory", "s3"], indirect=True)

SYSTEM = "You are a careful agent. " * 20  # packed in the log entry
STORE_PARTS = {"config", "segments", "locks", "tmp", "remotes"}


@dataclasses.dataclass
class Pushed:
    """A writer's store pushed to the remote, with the ids and object ids the tests tamper with."""

    good: str  # run "good": its only checkpoint
    other: str  # run "other": its only checkpoint
    artifact_oid: bytes  # the loose object of artifact "small.bin"
    node_oid: bytes  # the tree node of state["doc"]
    chunk_oid: bytes  # one chunk under that node
    entry: Entry  # good's entry, to craft bad ones from
    doc: bytes
    artifact: bytes


def push_writer(path: Path, spec: RemoteSpec) -> Pushed:
    rng = random.Random(17)
    doc, artifact = rng.randbytes(40_000), rng.randbytes(30_000)
    with agentfs.open(path) as store:
        good = store.run("good").commit({"system": SYSTEM, "doc": doc, "step": 1}, artifacts={"small.bin": artifact})
        other = store.run("other").commit({"system": SYSTEM, "step": 1})
        Pusher(store.engine, PackRemote(spec.url, spec.storage_options)).push()
        entry = store.engine.read_entry("good", good.id)
        doc_ref = entry.manifest.state["doc"].blob
        artifact_ref = entry.manifest.artifacts["small.bin"]
        assert isinstance(doc_ref, TreeRef) and doc_ref.depth == 1 and isinstance(artifact_ref, LooseRef)
        children = msgpack.unpackb(store.engine.db.read(doc_ref.oid), raw=False)
        return Pushed(good.id, other.id, artifact_ref.oid, doc_ref.oid, children[0][0], entry, doc, artifact)


def remote_path(spec: RemoteSpec, key: str) -> tuple[Any, str]:
    fs, root = spec.connect()
    return fs, f"{root.rstrip('/')}/{key}"


def record_of(key: str) -> tuple[int, bytes]:
    """The record a name like `runs/<run>/log/<id>` or `objects/<2 hex>/<62 hex>` stands for: (kind, key) in a pack."""
    parts = key.split("/")
    if parts[0] == "objects":
        return kinds.OBJECT, bytes.fromhex(parts[1] + parts[2])
    assert parts[0] == "runs" and parts[-2] == "log", key
    return kinds.ENTRY, kinds.pair_key("/".join(parts[1:-2]), parts[-1])


def put(spec: RemoteSpec, key: str, data: bytes) -> None:
    """The remote holds `data` as the record `key` names, well framed in a pack (remote_raw.put_record)."""
    fs, root = spec.connect()
    remote_raw.put_record(fs, root.rstrip("/"), *record_of(key), data)


def put_key(spec: RemoteSpec, key: str, data: bytes) -> None:
    fs, path = remote_path(spec, key)
    fs.pipe_file(path, data)


def get_key(spec: RemoteSpec, key: str) -> bytes:
    fs, path = remote_path(spec, key)
    return bytes(fs.cat_file(path))


def get(spec: RemoteSpec, key: str) -> bytes:
    fs, root = spec.connect()
    return remote_raw.record_body(fs, root.rstrip("/"), *record_of(key))


def object_key(oid: bytes) -> str:
    return f"objects/{oid.hex()[:2]}/{oid.hex()[2:]}"


def flip(spec: RemoteSpec, key: str, at: int) -> None:
    data = bytearray(get(spec, key))
    data[at] ^= 0x01
    put(spec, key, bytes(data))


def snapshot(root: Path) -> dict[str, tuple[int, int]]:
    """Every file under `root`: relative path -> (size, mtime)."""
    files = {}
    for dirpath, _dirs, names in os.walk(root):
        for name in names:
            path = Path(dirpath) / name
            stat = path.stat()
            files[str(path.relative_to(root))] = (stat.st_size, stat.st_mtime_ns)
    return files


def changed_outside(root: Path, before: dict[str, tuple[int, int]], stores: set[str]) -> list[str]:
    """Files created, changed or deleted under `root` since `before`, other than inside the named store dirs."""
    after = snapshot(root)
    changed = {path for path in after if before.get(path) != after[path]} | (before.keys() - after.keys())
    return sorted(path for path in changed if path.split(os.sep, 1)[0] not in stores)


def assert_inside_store(store: agentfs.Store) -> None:
    """The store directory holds only its own layout: no run or file escaped into a strange place."""
    assert {p.name for p in store.root.iterdir()} <= STORE_PARTS
    for path in store.root.rglob("*"):
        assert path.resolve().is_relative_to(store.root.resolve()), path


def assert_rest_usable(store: agentfs.Store, pushed: Pushed) -> None:
    other = store.run("other").get(pushed.other)
    assert other.state == {"system": SYSTEM, "step": 1}


def craft(entry: Entry, **changes: Any) -> bytes:
    """A log entry (checksum and all, so only the manifest is wrong) from `entry` with manifest fields changed: a
    format-1 entry, whose manifest names its run and id (every reader still reads one)."""
    return format1_entry(entry.manifest, entry.pack, **changes)


def open_reader(path: Path, spec: RemoteSpec) -> agentfs.Store:
    return agentfs.open(path, remote=spec.url, storage_options=spec.storage_options)


# --- a flipped byte --------------------------------------------------------------------------------


@pytest.mark.parametrize("target", ["artifact object", "tree node", "chunk"])
def test_a_flipped_byte_in_a_remote_object_is_refused_and_never_stored(remote: RemoteSpec, tmp_path: Path, target: str) -> None:
    pushed = push_writer(tmp_path / "writer", remote)
    oid = {"artifact object": pushed.artifact_oid, "tree node": pushed.node_oid, "chunk": pushed.chunk_oid}[target]
    flip(remote, object_key(oid), at=len(get(remote, object_key(oid))) // 2)
    before = snapshot(tmp_path)

    with open_reader(tmp_path / "reader", remote) as reader:
        cp = reader.run("good").latest()
        assert cp is not None and cp.id == pushed.good
        with pytest.raises(agentfs.IntegrityError, match=oid.hex()):
            if target == "artifact object":
                cp.artifacts["small.bin"].read_bytes()
            else:
                _ = cp.state
        assert not raw.has_object(reader, oid)  # the bad bytes never entered the store
        assert raw.temp_files(reader) == []
        assert_rest_usable(reader, pushed)
        # what does not need the bad object still loads
        if target == "artifact object":
            assert reader.run("good").get(pushed.good).state["doc"] == pushed.doc
        else:
            assert reader.run("good").get(pushed.good).artifacts["small.bin"].read_bytes() == pushed.artifact
        assert_inside_store(reader)

    with agentfs.open(tmp_path / "puller") as puller:
        mine = puller.run("mine").commit({"local": True})
        # the entry that needs the bad object is skipped and named; the rest of the pull proceeds
        stats = pull(puller.engine, PackRemote(remote.url, remote.storage_options))
        assert any(oid.hex() in reason for reason in stats.skipped), stats.skipped
        assert not raw.has_object(puller, oid)
        assert puller.run("mine").get(mine.id).state == {"local": True}
        assert puller.verify().ok
    assert changed_outside(tmp_path, before, {"reader", "puller"}) == []


def test_a_flipped_byte_in_a_remote_log_entry_is_refused(remote: RemoteSpec, tmp_path: Path) -> None:
    pushed = push_writer(tmp_path / "writer", remote)
    key = f"runs/good/log/{pushed.good}"
    flip(remote, key, at=len(get(remote, key)) - 10)
    with open_reader(tmp_path / "reader", remote) as reader:
        with pytest.raises(agentfs.IntegrityError, match="checksum"):
            reader.run("good").get(pushed.good)
        assert not raw.has_record(reader, "good", raw.LOG_RECORDS, pushed.good)
        assert_rest_usable(reader, pushed)


def test_a_packed_object_that_does_not_match_its_id_is_refused(remote: RemoteSpec, tmp_path: Path) -> None:
    """The entry's checksum is recomputed (a deliberate forgery): only the packed bytes are wrong."""
    pushed = push_writer(tmp_path / "writer", remote)
    blob = pushed.entry.manifest.state["system"].blob
    assert not isinstance(blob, InlineRef)
    oid = blob.oid
    forged = {**pushed.entry.pack, oid: codec.encode(b"You are a reckless agent. " * 20)}
    put(remote, f"runs/good/log/{pushed.good}", encode_entry(pushed.entry.manifest, forged)[0])
    with open_reader(tmp_path / "reader", remote) as reader:
        cp = reader.run("good").get(pushed.good)
        with pytest.raises(agentfs.IntegrityError, match=oid.hex()):
            _ = cp.state
        assert_rest_usable(reader, pushed)


# --- names outside the store -----------------------------------------------------------------------


def test_log_keys_that_are_not_ids_are_ignored(remote: RemoteSpec, tmp_path: Path) -> None:
    pushed = push_writer(tmp_path / "writer", remote)
    head = "/".join(keys.head_key("good", pushed.good))
    junk = get_key(remote, head)
    put_key(remote, f"{posixpath.dirname(head)}/not-an-id", junk)
    put_key(remote, f"{head}.partial", junk)
    put_key(remote, "packs/not-a-pack.idx", b"junk")
    put_key(remote, "packs/0123456789abcdef.idx.partial", b"junk")
    with open_reader(tmp_path / "reader", remote) as reader:
        assert reader.run("good").ids() == [pushed.good]
        assert reader.run("good").latest() is not None
        with pytest.raises(agentfs.InvalidName):
            reader.run("good").get("not-an-id")
        assert raw.record_ids(reader, "good") == [pushed.good]
    with agentfs.open(tmp_path / "puller") as puller:
        stats = pull(puller.engine, PackRemote(remote.url, remote.storage_options))
        assert stats.entries == 2
        assert raw.record_ids(puller, "good") == [pushed.good]
        assert puller.verify().ok


def test_runs_lists_only_runs_with_a_checkpoint(remote: RemoteSpec, tmp_path: Path) -> None:
    """store.runs() promises runs with at least one checkpoint; a stray key is not one."""
    pushed = push_writer(tmp_path / "writer", remote)
    good_head = get_key(remote, "/".join(keys.head_key("good", pushed.good)))
    put_key(remote, f"{'/'.join(keys.head_dir_key('stray'))}/not-an-id", good_head)
    with open_reader(tmp_path / "reader", remote) as reader:
        assert reader.run("stray").latest() is None
        assert reader.runs() == ["good", "other"]


def outside_cases(pushed: Pushed) -> dict[str, tuple[str, str, bytes, str]]:
    """case -> (run of its key, id of its key, entry bytes, what the error must mention)."""
    entry = pushed.entry
    system = entry.manifest.state["system"]
    assert not isinstance(system.blob, InlineRef)
    oid, size = system.blob.oid, system.blob.size
    ids = [new_id() for _ in range(7)]
    borrowed_outside = [system.format, system.items, [PACKED, oid, size, "../x", pushed.good]]
    return {
        "manifest run outside the store": ("evil1", ids[0], craft(entry, run="../../etc", id=ids[0]), "../../etc"),
        "manifest run differs from its key": ("evil2", ids[1], craft(entry, run="good", id=ids[1]), f"good@{ids[1]}"),
        "manifest id differs from its key": ("good", ids[2], craft(entry), f"good@{pushed.good}"),
        "entry stored under another key": ("good", ids[6], encode_entry(entry.manifest, entry.pack)[0], f"good@{ids[6]}"),
        "packed ref located in ../x": (
            "evil4",
            ids[3],
            craft(entry, run="evil4", id=ids[3], state=["map", {"system": borrowed_outside}]),
            "../x",
        ),
        "artifact named ../../evil": (
            "evil5",
            ids[4],
            craft(entry, run="evil5", id=ids[4], artifacts={"../../evil": [LOOSE, oid, size]}),
            "../../evil",
        ),
        "forked from ../up": ("evil6", ids[5], craft(entry, run="evil6", id=ids[5], forked_from=["../up", pushed.good]), "../up"),
    }


def test_a_remote_entry_naming_a_place_outside_its_key_is_refused(remote: RemoteSpec, tmp_path: Path) -> None:
    pushed = push_writer(tmp_path / "writer", remote)
    cases = outside_cases(pushed)
    for run, key_id, data, _ in cases.values():
        put(remote, f"runs/{run}/log/{key_id}", data)
        put_key(remote, "/".join(keys.head_key(run, key_id)), encode_head(run, key_id, []))  # as a hostile pusher would
    before = snapshot(tmp_path)

    problems = []
    with open_reader(tmp_path / "reader", remote) as reader:
        for case, (run, key_id, _, mentioned) in cases.items():
            try:
                reader.run(run).get(key_id)
                problems.append(f"{case}: accepted")
            except (agentfs.FormatError, agentfs.InvalidName, agentfs.IntegrityError) as refused:
                if mentioned not in str(refused):
                    problems.append(f"{case}: the error does not mention {mentioned!r}: {refused}")
            if raw.has_record(reader, run, raw.LOG_RECORDS, key_id):
                problems.append(f"{case}: installed in the local store")
            if run != "good":
                with pytest.raises((agentfs.FormatError, agentfs.InvalidName)):
                    reader.run(run).latest()
        assert not problems, problems
        assert_rest_usable(reader, pushed)
        assert reader.run("good").get(pushed.good).state["doc"] == pushed.doc
        assert_inside_store(reader)

    with agentfs.open(tmp_path / "puller") as puller:
        mine = puller.run("mine").commit({"local": True})
        stats = pull(puller.engine, PackRemote(remote.url, remote.storage_options))  # each bad entry skipped and named
        assert all(any(key_id in reason for reason in stats.skipped) for _run, key_id, _, _ in cases.values()), stats.skipped
        for run, key_id, _, _ in cases.values():
            assert not raw.has_record(puller, run, raw.LOG_RECORDS, key_id)
        assert puller.run("mine").get(mine.id).state == {"local": True}
        assert puller.verify().ok
        assert_inside_store(puller)
    assert changed_outside(tmp_path, before, {"reader", "puller"}) == []
    for escaped in ("etc", "x", "evil", "up"):
        assert not (tmp_path / escaped).exists() and not (tmp_path.parent / escaped).exists()


# --- malformed records -----------------------------------------------------------------------------


MALFORMED: dict[str, tuple[Any, str]] = {  # field -> (bad value, what the error must name)
    "created": ("yesterday", "created"),
    "writer": ("me", "writer"),
    "metadata": ("text, not bytes", "metadata"),
    "run": (42, "run"),
    "state": (["map", {"k": [0, 1, [7]]}], "state"),
    "artifacts": ({"a.bin": [LOOSE, b"short", 3]}, "artifact"),
    "parent": ("yesterday", "parent"),
    "forked_from": (["good", "not-an-id"], "forked_from"),
}


def test_a_manifest_with_a_malformed_field_is_refused_naming_the_field(remote: RemoteSpec, tmp_path: Path) -> None:
    pushed = push_writer(tmp_path / "writer", remote)
    planted = {}
    for field, (value, _) in MALFORMED.items():
        key_id = new_id()
        fields: dict[str, Any] = {"id": key_id, field: value}
        put(remote, f"runs/good/log/{key_id}", craft(pushed.entry, **fields))
        planted[field] = key_id
    problems = []
    with open_reader(tmp_path / "reader", remote) as reader:
        for field, key_id in planted.items():
            try:
                reader.run("good").get(key_id)
                problems.append(f"{field}: accepted")
            except agentfs.FormatError as refused:
                if MALFORMED[field][1] not in str(refused):
                    problems.append(f"{field}: the error does not name the field: {refused}")
            if raw.has_record(reader, "good", raw.LOG_RECORDS, key_id):
                problems.append(f"{field}: installed in the local store")
        assert reader.run("good").get(pushed.good).state["doc"] == pushed.doc  # the rest of the run still loads
        assert_rest_usable(reader, pushed)
    assert not problems, "\n".join(problems)


def test_a_tree_ref_to_an_object_that_is_not_a_node_is_refused(remote: RemoteSpec, tmp_path: Path) -> None:
    pushed = push_writer(tmp_path / "writer", remote)
    key_id = new_id()
    state = {key: encode_value_ref(value) for key, value in pushed.entry.manifest.state.items()}
    state["doc"] = [state["doc"][0], state["doc"][1], [TREE, pushed.artifact_oid, 40_000, 1]]  # random bytes, not a node
    put(remote, f"runs/good/log/{key_id}", craft(pushed.entry, id=key_id, state=["map", state]))
    with open_reader(tmp_path / "reader", remote) as reader:
        cp = reader.run("good").get(key_id)
        with pytest.raises(agentfs.FormatError, match="tree node"):
            _ = cp.state
        assert_rest_usable(reader, pushed)


# --- size limits -----------------------------------------------------------------------------------


def test_an_over_large_remote_key_is_refused(remote: RemoteSpec, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Limits lowered to a few KiB (the same code path as the real 64 MiB / 32 MiB, without moving 64 MiB)."""
    pushed = push_writer(tmp_path / "writer", remote)
    fs, root = remote.connect()
    placed = remote_raw.frames(fs, root.rstrip("/"))
    entry_size = placed[record_of(f"runs/good/log/{pushed.good}")].length
    object_size = placed[record_of(object_key(pushed.artifact_oid))].length
    assert object_size > entry_size
    monkeypatch.setattr(pack_remote, "READ_AHEAD", 0)
    monkeypatch.setattr(pack_remote, "MAX_FRAME", entry_size - 1)
    with open_reader(tmp_path / "reader", remote) as reader:
        with pytest.raises(agentfs.RemoteError, match="refused"):
            reader.run("good").get(pushed.good)
        assert not raw.has_record(reader, "good", raw.LOG_RECORDS, pushed.good)
        monkeypatch.setattr(pack_remote, "MAX_FRAME", entry_size)
        cp = reader.run("good").get(pushed.good)
        with pytest.raises(agentfs.RemoteError, match="refused"):
            cp.artifacts["small.bin"].read_bytes()
        assert not raw.has_object(reader, pushed.artifact_oid)
        assert_rest_usable(reader, pushed)


# --- pull ------------------------------------------------------------------------------------------


def test_pull_of_a_remote_with_one_bad_entry_keeps_the_local_store_intact(remote: RemoteSpec, tmp_path: Path) -> None:
    pushed = push_writer(tmp_path / "writer", remote)
    bad_id = new_id()
    put(remote, f"runs/bad/log/{bad_id}", craft(pushed.entry, run="bad", id=bad_id, created="yesterday"))
    with agentfs.open(tmp_path / "puller") as puller:
        mine = [puller.run("mine").commit({"step": step}, artifacts={"out.txt": b"x" * (100 + step)}) for step in range(3)]
        before = raw.stored(puller)
        stats = pull(puller.engine, PackRemote(remote.url, remote.storage_options))  # the bad entry skipped and named, the rest pulled
        assert any("created" in reason and bad_id in reason for reason in stats.skipped), stats.skipped
        assert not raw.has_record(puller, "bad", raw.LOG_RECORDS, bad_id)
        after = raw.stored(puller)
        assert {name: after.get(name) for name in before} == before  # nothing held before was lost or changed
        assert [cp.state for cp in puller.run("mine").history()] == [{"step": 2}, {"step": 1}, {"step": 0}]
        assert puller.run("mine").get(mine[0].id).artifacts["out.txt"].read_bytes() == b"x" * 100
        assert puller.verify().ok
        # the good runs can still be pulled on their own, and then work offline
        pull(puller.engine, PackRemote(remote.url, remote.storage_options), ["good", "other"])
    with agentfs.open(tmp_path / "puller") as offline:
        assert offline.run("good").get(pushed.good).state["doc"] == pushed.doc
        assert offline.run("good").get(pushed.good).artifacts["small.bin"].read_bytes() == pushed.artifact
        assert offline.verify().ok
