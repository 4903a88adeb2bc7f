"""Encrypted stores (docs/FORMAT.md, "Encryption"): nothing readable on disk, every record authenticated, keys."""

from __future__ import annotations

import json
import random
import shutil
import struct
import zlib
from pathlib import Path
from typing import Any

import pytest

import agentfs
from agentfs.engine.segments import FrameLocation, open_segment, segment_ids
from agentfs.format import crypto, kinds
from agentfs.format import segment as fmt
from agentfs.format.refs import TreeRef

PASSPHRASE = "correct horse battery staple"
FAST = 1 << 10  # scrypt's N for the slots these tests make (the default costs 0.1 s an open)
# each canary is placed in one kind of user data; none may appear in any byte of the store
CANARIES = {
    "run": "canaryRUNNAME",
    "fork": "canaryFORKNAME",
    "state_key": "canarySTATEKEY",
    "state_value": "canarySTATEVALUE",
    "big_value": "canaryBIGVALUE",
    "metadata": "canaryMETADATA",
    "artifact_name": "canaryARTIFACTNAME",
    "artifact": "canaryARTIFACTBYTES",
    "journal_key": "canaryJOURNALKEY",
    "journal_result": "canaryJOURNALRESULT",
}


def encryption(passphrase: str = PASSPHRASE) -> agentfs.Encryption:
    return agentfs.Encryption(passphrase=passphrase, scrypt_n=FAST)


def fill(store: agentfs.Store) -> None:
    """Every kind of user data, each holding its canary; segments sealed (footers) and compacted."""
    c = CANARIES
    run = store.run(f"agents/{c['run']}")
    first = run.commit({c["state_key"]: c["state_value"], "small": "x"}, metadata={"note": c["metadata"]})
    run.commit(
        {c["state_key"]: c["state_value"] * 2, "big": (c["big_value"] + " ") * 20_000},
        metadata={"note": c["metadata"]},
        artifacts={f"{c['artifact_name']}.txt": (c["artifact"] + "\n").encode() * 50_000},
    )
    run.journal.once(c["journal_key"], lambda: c["journal_result"])
    run.fork(first.id, c["fork"]).commit({"more": c["state_value"]})
    store.run("doomed").commit({"x": c["state_value"]})
    store.run("doomed").commit({"x": c["state_value"] + "2"})
    store.run("doomed").prune(keep_last=1)
    store.gc(grace=0)  # seals segments (footers with run tables) and compacts


def every_byte(root: Path) -> bytes:
    return b"\0".join(path.name.encode() + b"\0" + path.read_bytes() for path in sorted(root.rglob("*")) if path.is_file())


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An encrypted store holding every kind of user data (fill), made once for the tests that only read or copy it."""
    root = tmp_path_factory.mktemp("filled") / "store"
    with agentfs.open(root, encryption=encryption()) as store:
        fill(store)
    return root


def test_no_canary_appears_in_any_byte_of_the_store(tmp_path: Path, filled: Path) -> None:
    data = every_byte(filled)
    for what, canary in CANARIES.items():
        assert canary.encode() not in data, f"the {what} canary is readable in the store"
        assert canary.lower().encode() not in data.lower()
    # and the same fill in a plaintext store shows them: the check can see a leak
    plain = tmp_path / "plain"
    with agentfs.open(plain) as store:
        fill(store)
    assert CANARIES["run"].encode() in every_byte(plain)


def test_an_encrypted_store_reads_back_everything(tmp_path: Path, filled: Path) -> None:
    root = tmp_path / "store"
    shutil.copytree(filled, root)
    c = CANARIES
    with agentfs.open(root, encryption=PASSPHRASE) as store:
        assert store.runs() == sorted([f"agents/{c['run']}", c["fork"], "doomed"])
        head = store.run(f"agents/{c['run']}").latest()
        assert head is not None
        assert head.state["big"].startswith(c["big_value"])
        assert head.metadata == {"note": c["metadata"]}
        assert head.artifacts[f"{c['artifact_name']}.txt"].read_bytes().startswith(c["artifact"].encode())
        assert store.run(f"agents/{c['run']}").journal.get(c["journal_key"]).result == c["journal_result"]
        assert len(store.run("doomed").history()) == 1
        assert any(cp.forked_from and cp.forked_from[0] == f"agents/{c['run']}" for cp in store.run(c["fork"]).history())
        assert store.verify().ok


def _frames(root: Path) -> list[tuple[Path, fmt.IndexEntry]]:
    segments = root / "segments"
    views = [open_segment(segments / fmt.segment_name(sid)) for sid in segment_ids(segments)]
    return [(view.path, entry) for view in views for entry in view.entries]


def _flip_body_bit(path: Path, entry: fmt.IndexEntry) -> None:
    """Flip the last bit of the record's body and recompute the frame's crc32: damage the frame check cannot see."""
    data = bytearray(path.read_bytes())
    start, end = entry.offset, entry.offset + entry.length
    data[end - 1] ^= 1
    length, _crc, kind = fmt.FRAME.unpack_from(data, start)
    crc = zlib.crc32(struct.pack(">I", length) + bytes((kind,)) + bytes(data[start + fmt.FRAME.size : end]))
    struct.pack_into(">I", data, start + 4, crc)
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("kind", [kinds.OBJECT, kinds.ENTRY, kinds.JOURNAL, kinds.RETIRED, kinds.FORK])
def test_a_flipped_bit_in_any_sealed_record_is_refused_before_decoding(tmp_path: Path, filled: Path, kind: int) -> None:
    original = filled
    frames = [(path, entry) for path, entry in _frames(original) if entry.kind == kind]
    assert frames
    root = tmp_path / "damaged"
    shutil.copytree(original, root)
    path, entry = frames[0]
    if kind != kinds.OBJECT:  # a small record lies in its batch's GROUP record (the footer's row names the group's frame)
        assert (root / "segments" / path.name).read_bytes()[entry.offset + fmt.FRAME.size - 1] == kinds.GROUP
    _flip_body_bit(root / "segments" / path.name, entry)
    with agentfs.open(root, encryption=encryption()) as store:
        location = FrameLocation(fmt.segment_id_of(path.name), entry.offset, entry.length)
        with pytest.raises(agentfs.IntegrityError, match="does not authenticate"):
            store.engine.index.read(location)
        problems = [str(p) for p in store.verify().problems] if kind != kinds.FORK else []
    if kind in (kinds.OBJECT, kinds.ENTRY, kinds.JOURNAL, kinds.RETIRED):
        assert any("does not authenticate" in p for p in problems), problems


def test_a_body_moved_to_another_key_or_kind_is_refused(tmp_path: Path) -> None:
    """The associated data binds a body to its kind and stored key: moved, it does not authenticate."""
    with agentfs.open(tmp_path / "store", encryption=encryption()) as store:
        sealer = store.engine.sealer
        assert sealer is not None
        one = sealer.stored_key(kinds.ENTRY, kinds.pair_key("a", "0" * 26))
        two = sealer.stored_key(kinds.ENTRY, kinds.pair_key("a", "1" * 26))
        sealed = sealer.seal(kinds.ENTRY, one, b"body")
        assert sealer.open(kinds.ENTRY, one, sealed, "here") == b"body"
        for kind, key in ((kinds.ENTRY, two), (kinds.JOURNAL, one)):
            with pytest.raises(agentfs.IntegrityError, match="does not authenticate"):
                sealer.open(kind, key, sealed, "here")


def test_a_stored_key_is_the_same_from_a_fresh_sealer_as_from_one_that_saw_the_run_before() -> None:
    """stored_key keeps each run's stored prefix after its first key: the keys it makes then are a fresh sealer's,
    a fork's (two runs) included, and each reads back to its plain key. Planted (a fork's key filling the prefix
    of its source run as if its target were an id), the entry after the fork gets the wrong stored name."""
    master = crypto.new_master()
    warm = crypto.Sealer(master)
    keys = [
        (kinds.FORK, kinds.pair_key("src", "dst")),
        (kinds.ENTRY, kinds.pair_key("src", "0" * 26)),
        (kinds.ENTRY, kinds.pair_key("src", "1" * 26)),
        (kinds.FORK, kinds.pair_key("dst", "src")),
        (kinds.JOURNAL, kinds.pair_key("dst", "tool\0call")),
        (kinds.RETIRED, kinds.pair_key("dst", "2" * 26)),
        (kinds.OBJECT, bytes(32)),
    ]
    for kind, key in keys:
        stored = warm.stored_key(kind, key)
        assert stored == crypto.Sealer(master).stored_key(kind, key), (kind, key)
        assert crypto.Sealer(master).plain_key(kind, stored, "here") == key


def test_wrong_or_missing_passphrase_is_one_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "store"
    with agentfs.open(root, encryption=encryption()) as store:
        store.run("a").commit({"v": 1})
    monkeypatch.delenv("AGENTFS_PASSWORD", raising=False)
    monkeypatch.delenv("AGENTFS_PASSWORD_FILE", raising=False)
    with pytest.raises(agentfs.WrongKey, match="wrong passphrase"):
        agentfs.open(root, encryption="not it")
    with pytest.raises(agentfs.WrongKey, match="no passphrase or key file given"):
        agentfs.open(root)
    monkeypatch.setenv("AGENTFS_PASSWORD", PASSPHRASE)
    with agentfs.open(root) as store:
        assert store.run("a").latest().state == {"v": 1}
    monkeypatch.delenv("AGENTFS_PASSWORD")
    secret = tmp_path / "pw"
    secret.write_text(PASSPHRASE + "\n")
    monkeypatch.setenv("AGENTFS_PASSWORD_FILE", str(secret))
    with agentfs.open(root) as store:
        assert store.run("a").latest().state == {"v": 1}


def test_a_plaintext_reader_refuses_an_encrypted_config(tmp_path: Path) -> None:
    """Readers that predate encryption check `hash` == sha256: an encrypted store's config names hmac-sha256."""
    root = tmp_path / "store"
    with agentfs.open(root, encryption=encryption()) as store:
        store.run("a").commit({"v": 1})
    config = json.loads((root / "config").read_text())
    assert config["hash"] == "hmac-sha256"
    assert config["encryption"]["cipher"] == "aes-256-gcm"
    del config["encryption"]  # what a reader that ignores the field sees: refused by its hash
    (root / "config").write_text(json.dumps(config))
    with pytest.raises(agentfs.FormatError, match="hmac-sha256"):
        agentfs.open(root)


def test_a_plaintext_store_is_not_opened_as_encrypted(tmp_path: Path) -> None:
    root = tmp_path / "store"
    with agentfs.open(root) as store:
        store.run("a").commit({"v": 1})
    with pytest.raises(agentfs.FormatError, match="copy --encrypt"):
        agentfs.open(root, encryption=PASSPHRASE)


def _conversation_store(root: Path, key: agentfs.Encryption | None, steps: int) -> int:
    from benchmarks.data import conversation  # the benchmarks' growing conversation: ~500-byte messages, a 10 KB pad

    with agentfs.open(root, encryption=key, durability="process") as store:
        run = store.run("conversation")
        for state in conversation(steps):
            run.commit(state)
    return sum(path.stat().st_size for path in (root / "segments").iterdir())


def test_dedup_of_a_growing_conversation_matches_the_plaintext_store(tmp_path: Path) -> None:
    """Chunks are cut from the plaintext and tree nodes end where the plaintext store's do (refs.node_ends), so
    the same objects are stored once each; what differs is 28 bytes a sealed record and the longer stored run
    name of each entry. 1,000 steps: the tree of the message list is 2 levels deep and rewritten at each commit."""
    steps = 1000
    plain = _conversation_store(tmp_path / "plain", None, steps)
    sizes = [_conversation_store(tmp_path / f"enc{n}", encryption(f"key {n}"), steps) for n in range(2)]
    assert max(sizes) <= plain * 1.05, (plain, sizes)


def _tree_shape(store: agentfs.Store, oid: bytes, depth: int) -> list[Any]:
    """A tree's chunk sizes, nested as its nodes are."""
    children = store.engine.db.read_node(oid, "test")
    return [size if depth == 1 else _tree_shape(store, child, depth - 1) for child, size in children]


def _shapes(root: Path, key: agentfs.Encryption | None) -> list[list[Any]]:
    """The tree shapes of a grown message list (small chunks) and a 5 MB artifact (large ones), per commit."""
    from benchmarks.data import conversation

    rng = random.Random(4)
    with agentfs.open(root, encryption=key, durability="process") as store:
        run = store.run("shapes")
        shapes = []
        for step, state in enumerate(conversation(500)):
            if step % 100 == 99:
                entry = store.engine.read_entry("shapes", run.commit(state, artifacts={"a.bin": rng.randbytes(5_000_000)}).id)
                for ref in entry.blob_refs():
                    if isinstance(ref, TreeRef):
                        shapes.append(_tree_shape(store, ref.oid, ref.depth))
    return shapes


def test_tree_nodes_end_where_the_plaintext_store_s_do(tmp_path: Path) -> None:
    """Node ends follow chunk sizes, which are the plaintext's, not the keyed ids: every tree of an encrypted
    store has the plaintext tree's shape, under any key."""
    plain = _shapes(tmp_path / "plain", None)
    assert len(plain) == 10  # the message list and the artifact of each of the 5 commits
    assert sum(len(shape) for shape in plain) >= 20  # tree nodes enough that keyed ends would differ
    for n in range(2):
        assert _shapes(tmp_path / f"enc{n}", encryption(f"key {n}")) == plain


def test_dedup_of_an_edited_large_artifact_matches_the_plaintext_store(tmp_path: Path) -> None:
    import random

    def store_size(root: Path, key: agentfs.Encryption | None) -> int:
        rng = random.Random(5)
        data = bytearray(rng.randbytes(8 << 20))
        with agentfs.open(root, encryption=key, durability="process") as store:
            run = store.run("artifact")
            for _edit in range(4):
                run.commit({}, artifacts={"big.bin": bytes(data)})
                data[rng.randrange(len(data))] ^= 0xFF  # one byte changed: one chunk and its tree path stored again
        return sum(path.stat().st_size for path in (root / "segments").iterdir())

    plain = store_size(tmp_path / "plain", None)
    encrypted = store_size(tmp_path / "enc", encryption())
    assert plain * 1.10 < 4 * (8 << 20)  # dedup at work: 4 versions cost little more than one
    assert encrypted <= plain * 1.05, (plain, encrypted)


def test_watch_names_runs_of_an_encrypted_store(tmp_path: Path) -> None:
    """A watcher sees another writer's checkpoint by its run's name, also when that writer's segment is
    sealed (its footer names runs by stored names) before the watcher reads it."""
    import os

    root = tmp_path / "store"
    with agentfs.open(root, encryption=encryption()) as store, store.watch(timeout=10) as changes:
        with agentfs.open(root, encryption=encryption()) as writer:
            made = writer.run(f"agents/{CANARIES['run']}").commit({"v": 1}, artifacts={"big.bin": os.urandom(2 << 20)})
        # closed with over 1 MiB: sealed
        seen = next(iter(changes))
        assert (seen.run, seen.id) == (f"agents/{CANARIES['run']}", made.id)


def test_a_key_slot_asking_for_more_than_256_mib_of_scrypt_opens_nothing() -> None:
    """A remote's slot is untrusted: its scrypt cost is bounded before scrypt runs (n=2^20, r=32 would take 4 GiB)."""
    import dataclasses
    import time

    from agentfs.format import crypto

    slot = crypto.make_slot(crypto.new_master(), b"pw", "passphrase", scrypt_n=FAST)
    hostile = dataclasses.replace(slot, kdf={**slot.kdf, "n": 1 << 20, "r": 32})
    started = time.monotonic()
    assert crypto.open_slot(hostile, b"pw", "a remote") is None
    assert time.monotonic() - started < 1
    assert crypto.open_slot(slot, b"pw", "a remote") is not None
