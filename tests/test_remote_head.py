"""Finding a run's head on S3 lists only the newest keys, and is exact whatever the clocks say."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from ulid import ULID

import agentfs
from agentfs.format import keys
from agentfs.sync.pack_remote import PackRemote
from agentfs.sync.push import Pusher
from tests.servers import MotoServer, make_s3_spec

pytest_plugins = ["tests.servers"]


def ulid_at(seconds: float) -> str:
    return str(ULID.from_timestamp(seconds))


def head_key(remote: PackRemote, run: str, checkpoint_id: str) -> str:
    return remote.key(*keys.head_key(run, checkpoint_id))


def head_dir(remote: PackRemote, run: str) -> str:
    return remote.key(*keys.head_dir_key(run))


def test_s3_head_lists_only_recent_keys_and_sees_future_ones(
    tmp_path: Path, moto_server: MotoServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = make_s3_spec(moto_server)
    remote = PackRemote(spec.url, spec.storage_options)
    day_ago = time.time() - 86400
    for n in range(300):  # a long history of head keys, a day old (their bytes are never read by head_id)
        remote.fs.pipe_file(head_key(remote, "r", ulid_at(day_ago + n)), b"old")
    with agentfs.open(tmp_path / "s", durability="process") as store:
        run = store.run("r")
        for step in range(3):
            run.commit({"step": step})
        Pusher(store, remote).push()
        head = run.head_id()
    listed: list[int] = []
    real = remote.fs.call_s3

    def counting(method: str, *args: Any, **kwargs: Any) -> Any:
        page = real(method, *args, **kwargs)
        listed.append(len(page.get("Contents", [])))
        return page

    monkeypatch.setattr(remote.fs, "call_s3", counting)
    monkeypatch.setattr(remote, "list_names", lambda prefix: pytest.fail("the head lookup listed every head key"))
    assert remote.head_id("r") == head
    assert sum(listed) <= 30 and len(listed) <= 30  # one-key probes near now, never the day-old history

    future = ulid_at(time.time() + 3600)  # a machine whose clock is an hour ahead
    remote.fs.pipe_file(head_key(remote, "r", future), b"not read by greatest_id")
    listed.clear()
    assert remote.greatest_id(head_dir(remote, "r")) == future
    assert sum(listed) <= 3  # a probe past now, then the keys from the future: one


def test_s3_head_of_an_empty_or_old_run(tmp_path: Path, moto_server: MotoServer) -> None:
    spec = make_s3_spec(moto_server)
    remote = PackRemote(spec.url, spec.storage_options)
    assert remote.head_id("nothing/here") is None
    old = ulid_at(time.time() - 3 * 365 * 86400)
    remote.fs.pipe_file(head_key(remote, "old", old), b"x")
    assert remote.greatest_id(head_dir(remote, "old")) == old


def test_s3_head_of_a_dense_recent_history_bisects_instead_of_listing(
    tmp_path: Path, moto_server: MotoServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """600 checkpoints in the last 30 s: the first probe that finds keys would list them all; bisecting lists a few."""
    spec = make_s3_spec(moto_server)
    remote = PackRemote(spec.url, spec.storage_options)
    now = time.time()
    ids = sorted(ulid_at(now - 30 + n * 0.05) for n in range(600))
    remote.fs.pipe({head_key(remote, "dense", i): b"x" for i in ids})
    requests: list[int] = []
    real = remote.fs.call_s3

    def counting(method: str, *args: Any, **kwargs: Any) -> Any:
        page = real(method, *args, **kwargs)
        requests.append(len(page.get("Contents", [])))
        return page

    monkeypatch.setattr(remote.fs, "call_s3", counting)
    monkeypatch.setattr(remote, "list_names", lambda prefix: pytest.fail("the head lookup fell back to listing every head key"))
    assert remote.greatest_id(head_dir(remote, "dense")) == ids[-1]
    assert len(requests) <= 30 and sum(requests) <= 30, f"{len(requests)} requests listed {sum(requests)} keys"
