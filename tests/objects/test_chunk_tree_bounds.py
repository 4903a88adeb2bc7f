"""A chunk tree never makes a read hold more than its reference claims, nor a value more than the largest value.

A tree repeating one chunk costs a few objects and can claim any size: a node's children must add up to
the size its parent (or the reference) gives it before any child is read, each chunk must be the size its
node gives it, and a value whose reference claims more than `MAX_VALUE` (1 GiB) is refused before a byte is
read (objects/blobs.py BlobReader). Crafted locally and on a hostile remote (file and moto S3, resumed by a
fresh machine), each read in a child process whose peak memory is measured.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import agentfs
from agentfs.engine.object_store import ObjectWriter
from agentfs.format.entries import encode_entry
from agentfs.format.manifest import MAP_STATE, MAX_VALUE, Manifest, ValueRef
from agentfs.format.refs import TreeRef, encode_node
from agentfs.ids import new_id
from agentfs.sync.pack_remote import PackRemote
from agentfs.sync.push import Pusher
from tests.helpers.hostile import HostileRemote

CHUNK = 32 << 10  # one chunk of random bytes, repeated
FANOUT = 256  # children of each crafted node: two levels repeat the chunk 65,536 times, 2 GiB
WHOLE = CHUNK * FANOUT * FANOUT
BOUND = 64 << 20  # the peak memory over the child's baseline a refusal may cost
ROOT = Path(__file__).resolve().parents[2]


def craft(store: agentfs.Store) -> str:
    """A checkpoint of run "r" whose state value "big" is a consistent 2 GiB tree of one repeated chunk, whose
    artifact "lies.bin" is that tree under a reference claiming 64 KiB, and whose artifact "short.bin" lists
    4 chunks each one byte longer than the chunk is; its id."""
    chunk = os.urandom(CHUNK)
    with store.engine.writing():
        writer = ObjectWriter(store.engine.db, store.engine.pool)
        chunk_oid = writer.add(chunk)
        middle = writer.add(encode_node([[chunk_oid, CHUNK]] * FANOUT))
        top = writer.add(encode_node([[middle, CHUNK * FANOUT]] * FANOUT))
        short = writer.add(encode_node([[chunk_oid, CHUNK + 1]] * 4))
        objects = writer.finish()
        manifest = Manifest(
            run="r",
            id=new_id(),
            parent=None,
            created=time.time_ns(),
            writer=store.engine.writer(),
            metadata=b"\x80",
            state_kind=MAP_STATE,
            state={"big": ValueRef(0, 1, TreeRef(top, WHOLE, 2))},
            artifacts={"lies.bin": TreeRef(top, 2 * CHUNK, 2), "short.bin": TreeRef(short, 4 * (CHUNK + 1), 1)},
        )
        data, _entry = encode_entry(manifest, {}, store.engine.hasher)
        with store.engine.appending("r"):
            assert store.engine.append_entry("r", manifest.id, data, objects=objects)
    return manifest.id


def check_refusals(root: Path, checkpoint_id: str, *remote: str) -> None:
    """The state and both artifacts read in one child (each refusal's peak memory measured): each refused."""
    artifacts = ["--artifact", "lies.bin", "--artifact", "short.bin"]
    done = subprocess.run(
        [sys.executable, "-m", "tests.helpers.huge_record", str(root), "r", checkpoint_id, *artifacts, *remote],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr  # a signal or a traceback is a failure, not a refusal
    value, lies, short = json.loads(done.stdout)
    refused = f"FormatError: r@{checkpoint_id} state['big']: its reference claims {WHOLE} bytes, over the largest value ({MAX_VALUE})"
    assert value["outcome"] == refused, value
    assert str(lies["outcome"]).startswith("FormatError: artifact 'lies.bin'"), lies
    assert f"lists {CHUNK * FANOUT * FANOUT} bytes of children where {2 * CHUNK} are claimed" in str(lies["outcome"]), lies
    assert f"holds {CHUNK} bytes where its tree node claims {CHUNK + 1}" in str(short["outcome"]), short
    for result in (value, lies, short):
        assert result["peak_over_baseline"] < BOUND, result


def test_a_tree_repeating_one_chunk_is_refused_locally_with_bounded_memory(tmp_path: Path) -> None:
    root = tmp_path / "store"
    with agentfs.open(root) as store:
        checkpoint_id = craft(store)
    check_refusals(root, checkpoint_id)


def test_a_tree_repeating_one_chunk_on_a_hostile_remote_is_refused_by_a_resuming_machine(
    tmp_path: Path, hostile_remote: HostileRemote
) -> None:
    with agentfs.open(tmp_path / "crafter") as store:  # what a hostile pusher uploads: every object hashes right
        checkpoint_id = craft(store)
        Pusher(store.engine, PackRemote(hostile_remote.url, hostile_remote.storage_options)).push()
    remote = ["--remote", hostile_remote.url, json.dumps(hostile_remote.storage_options)]
    check_refusals(tmp_path / "resumer", checkpoint_id, *remote)


def test_a_value_over_the_largest_is_refused_at_commit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from agentfs.core import commit_input

    monkeypatch.setattr(commit_input, "MAX_VALUE", 1000)  # the real limit, 1 GiB, would cost that much here
    with agentfs.open(tmp_path / "store") as store:
        run = store.run("r")
        with pytest.raises(agentfs.SerializationError, match=r'state\["big"\] is \d+ bytes encoded, over the largest value \(1000\)'):
            run.commit({"big": "x" * 2000, "small": 1})
        with pytest.raises(agentfs.SerializationError, match=r"^state is \d+ bytes encoded"):
            run.commit(["x" * 2000])
        assert run.ids() == []


def test_a_blob_needing_a_tree_deeper_than_readers_accept_is_refused_at_commit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Readers refuse a TREE ref deeper than MAX_DEPTH (8): a writer that built one would commit a value no reader
    can load. 8 levels hold about 8^8 chunks, so the limit is lowered here to reach it with a 2 MB value (about 500
    chunks, 3 levels) and a 16 MB artifact. Planted: without the writer's check, the commit succeeds (and at the
    real limit every read of it raises FormatError)."""
    from agentfs.objects import blobs

    monkeypatch.setattr(blobs, "MAX_DEPTH", 1)
    with agentfs.open(tmp_path / "store") as store:
        run = store.run("r")
        first = run.commit({"small": 1})
        too_deep = r"bytes need a chunk tree deeper than the 1 levels agentfs reads"
        with pytest.raises(agentfs.SerializationError, match=r"^state\['big'\] of a commit to run 'r': its 2,097,\d+ " + too_deep):
            run.commit({"big": os.urandom(2 << 20), "small": 2})
        with pytest.raises(agentfs.SerializationError, match=r"^artifact 'big.bin' of a commit to run 'r': its 16,777,216 " + too_deep):
            run.commit({}, artifacts={"big.bin": os.urandom(16 << 20)})  # about 128 chunks of an artifact's larger size
        assert run.ids() == [first.id]
        latest = run.latest()
        assert latest is not None and latest.state == {"small": 1}
