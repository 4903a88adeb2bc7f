"""`RemoteConformance`: what agentfs needs from a remote backend, checked through the public API and the
command line only, so any fsspec backend (a new filesystem, an S3-compatible service) can run it.

Subclass it in a test module and give it a `remote` fixture: a fresh, empty location for each test,
any object with `url` and `storage_options` (`RemoteLocation` is one):

    class TestMyBackend(RemoteConformance):
        @pytest.fixture
        def remote(self, tmp_path):
            return RemoteLocation(f"myfs://bucket/{uuid.uuid4().hex}", {"endpoint": "..."})

The command line accepts a protocol fsspec lists in `fsspec.available_protocols()` (its known
implementations); a filesystem only registered with `fsspec.register_implementation` is refused there.
Needs pytest. agentfs's own tests run it on file://, memory://, S3 (moto) and GCS (its emulator):
tests/sync/test_remote_backends.py. A backend that acknowledges pack uploads and drops them fails four of
its five tests (RemoteDataMissing naming the pack, or a wrong answer).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import pytest

import agentfs
from agentfs.cli.main import main as agentfs_cli

FLUSH_TIMEOUT = 120.0  # seconds a push may take on a slow emulator
ARTIFACT_BYTES = 300_000  # chunked into several objects


class RemoteLike(Protocol):
    url: str
    storage_options: dict[str, Any]


@dataclass(frozen=True)
class RemoteLocation:
    url: str
    storage_options: dict[str, Any] = field(default_factory=dict)


def _options(remote: RemoteLike) -> list[str]:
    return ["--storage-options", json.dumps(remote.storage_options)]


def _commit_steps(store: agentfs.Store, run: str, steps: int) -> dict[str, bytes]:
    """`steps` checkpoints of a growing conversation with a chunked artifact; the artifact of the head."""
    rng = random.Random(steps)
    artifact = b""
    for step in range(steps):
        artifact = rng.randbytes(ARTIFACT_BYTES)
        head = store.run(run).latest()
        messages = [*(head.state["messages"] if head is not None else []), f"turn {step}"]
        store.run(run).commit({"messages": messages}, artifacts={"model.bin": artifact})
    return {"model.bin": artifact}


def _push(store: agentfs.Store, remote: RemoteLike) -> None:
    with store.sync(remote.url, storage_options=remote.storage_options) as daemon:
        assert daemon.flush(timeout=FLUSH_TIMEOUT), f"the push to {remote.url} did not finish in {FLUSH_TIMEOUT} s"


def _same_run(read: agentfs.Store, written: agentfs.Store, run: str, artifacts: dict[str, bytes]) -> None:
    head, expected = read.run(run).latest(), written.run(run).latest()
    assert head is not None and expected is not None, f"{run} has no checkpoint"
    assert (head.id, head.state) == (expected.id, expected.state)
    assert {name: a.read_bytes() for name, a in head.artifacts.items()} == artifacts
    assert [cp.id for cp in read.run(run).history()] == [cp.id for cp in written.run(run).history()]


class RemoteConformance:
    """Push, resume, pull, clone, refusal of a location never synced, two writers on one run, verify."""

    def test_a_fresh_store_resumes_what_was_pushed(self, remote: RemoteLike, tmp_path: Path) -> None:
        with agentfs.open(tmp_path / "a") as store:
            artifacts = _commit_steps(store, "agent/task", 3)
            _push(store, remote)
            with agentfs.open(tmp_path / "b", remote=remote.url, storage_options=remote.storage_options) as resumed:
                _same_run(resumed, store, "agent/task", artifacts)
                resumed.run("agent/task").commit({"messages": ["resumed"]}, keep_artifacts=True)  # and goes on

    def test_pull_and_clone_copy_everything_that_then_works_offline(self, remote: RemoteLike, tmp_path: Path) -> None:
        with agentfs.open(tmp_path / "a") as store:
            artifacts = _commit_steps(store, "agent/task", 2)
            _push(store, remote)
            agentfs.open(tmp_path / "pulled").close()
            assert agentfs_cli(["--store", str(tmp_path / "pulled"), "-q", "pull", remote.url, *_options(remote)]) == 0
            assert agentfs_cli(["-q", "clone", remote.url, str(tmp_path / "cloned"), *_options(remote)]) == 0
            for copy in ("pulled", "cloned"):
                with agentfs.open(tmp_path / copy, create=False) as offline:  # opened without the remote
                    _same_run(offline, store, "agent/task", artifacts)
                    assert offline.verify().ok

    def test_a_location_never_synced_is_refused_not_read_as_empty(self, remote: RemoteLike, tmp_path: Path) -> None:
        never_synced = remote.url.rstrip("/") + "/never-synced"
        with pytest.raises(agentfs.RemoteError, match="never-synced"):
            agentfs.open(tmp_path / "a", remote=never_synced, storage_options=remote.storage_options).close()
        assert agentfs_cli(["-q", "clone", never_synced, str(tmp_path / "cloned"), *_options(remote)]) == 4
        assert not (tmp_path / "cloned").exists()

    def test_two_machines_committing_on_one_head_keep_both(self, remote: RemoteLike, tmp_path: Path) -> None:
        with agentfs.open(tmp_path / "a") as first:
            _commit_steps(first, "agent/task", 1)
            _push(first, remote)
            with agentfs.open(tmp_path / "b", remote=remote.url, storage_options=remote.storage_options) as second:
                parent = second.run("agent/task").latest()
                assert parent is not None
                theirs = second.run("agent/task").commit({"by": "b"}, parent=parent.id)
                _push(second, remote)
            ours = first.run("agent/task").commit({"by": "a"}, parent=parent.id)
            _push(first, remote)
        agentfs.open(tmp_path / "c").close()
        assert agentfs_cli(["--store", str(tmp_path / "c"), "-q", "pull", remote.url, *_options(remote)]) == 0
        with agentfs.open(tmp_path / "c", create=False) as third:
            assert set(third.run("agent/task").heads()) == {ours.id, theirs.id}
            latest = third.run("agent/task").latest()
            assert latest is not None and latest.id == max(ours.id, theirs.id)  # newest wins

    def test_verify_of_the_remote_is_clean(self, remote: RemoteLike, tmp_path: Path) -> None:
        store_dir = tmp_path / "a"
        with agentfs.open(store_dir) as store:
            _commit_steps(store, "agent/task", 2)
            _push(store, remote)
        verify = ["--store", str(store_dir), "-q", "verify", "--remote", remote.url, *_options(remote)]
        assert agentfs_cli(verify) == 0
        assert agentfs_cli([*verify, "--deep"]) == 0
