"""Finding a run's head on S3 and GCS is one listing request of one key, whatever the history and the clocks.

Head keys are named so the newest sorts first (keys.head_name); the requests are counted on the
servers themselves (moto's WSGI app, the GCS emulator's router). Long histories are planted straight
into the servers' storage (10,000 PUTs would take minutes); what is measured is the lookup's requests.
"""

from __future__ import annotations

import contextlib
import json
import random
import subprocess
import sys
import time
import urllib.parse
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from gcp_storage_emulator import server as gcs_emulator
from gcp_storage_emulator.handlers.objects import _make_object_resource
from moto.core import DEFAULT_ACCOUNT_ID
from moto.s3.models import s3_backends
from ulid import ULID

import agentfs
from agentfs.format import keys
from agentfs.format.pack import encode_head
from agentfs.ids import new_id
from agentfs.sync.pack_remote import PackRemote, open_remote
from agentfs.sync.push import Pusher
from tests.clock import skewed_env
from tests.servers import GcsServer, MotoServer, RemoteSpec, make_file_spec, make_gcs_spec, make_s3_spec

Request = tuple[str, str, dict[str, list[str]]]  # method, path, query


@contextlib.contextmanager
def moto_requests(server: MotoServer) -> Iterator[list[Request]]:
    """Every request moto's server receives meanwhile."""
    seen: list[Request] = []
    wsgi = server._server._server
    inner = wsgi.app

    def counting(environ: dict[str, Any], start_response: Any) -> Any:
        seen.append((environ["REQUEST_METHOD"], environ["PATH_INFO"], urllib.parse.parse_qs(environ.get("QUERY_STRING", ""))))
        return inner(environ, start_response)

    wsgi.app = counting
    try:
        yield seen
    finally:
        wsgi.app = inner


@contextlib.contextmanager
def gcs_requests(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Request]]:
    """Every request the GCS emulator's router handles meanwhile."""
    seen: list[Request] = []
    handle = gcs_emulator.Router.handle

    def counting(router: gcs_emulator.Router, method: str) -> None:
        url = urllib.parse.urlsplit(router._request_handler.path)
        seen.append((method, url.path, urllib.parse.parse_qs(url.query)))
        handle(router, method)

    with monkeypatch.context() as patch:
        patch.setattr(gcs_emulator.Router, "handle", counting)
        yield seen


def plant_s3(spec: RemoteSpec, objects: dict[str, bytes]) -> None:
    bucket, _, prefix = spec.url.removeprefix("s3://").partition("/")
    backend = s3_backends[DEFAULT_ACCOUNT_ID]["global"]
    for key, data in objects.items():
        backend.put_object(bucket, f"{prefix}/{key}", data)


def plant_gcs(server: GcsServer, spec: RemoteSpec, objects: dict[str, bytes], monkeypatch: pytest.MonkeyPatch) -> None:
    bucket, _, prefix = spec.url.removeprefix("gs://").partition("/")
    storage = server._server._storage
    with monkeypatch.context() as patch:  # the emulator rewrites its whole metadata file per object: once, at the end
        patch.setattr(storage, "_write_config_to_file", lambda: None)
        for key, data in objects.items():
            name = f"{prefix}/{key}"
            storage.create_file(bucket, name, data, _make_object_resource(server.endpoint_url, bucket, name, "application/json", len(data)))
    storage._write_config_to_file()


def head_keys(run: str, ids: list[str]) -> dict[str, bytes]:
    return {"/".join(keys.head_key(run, checkpoint_id)): encode_head(run, checkpoint_id, []) for checkpoint_id in ids}


def test_head_names_sort_in_the_reverse_order_of_ids_and_name_them() -> None:
    now = time.time()
    ids = [new_id() for _ in range(50)] + [str(ULID.from_timestamp(now + random.uniform(-1e9, 1e9))) for _ in range(500)]
    ids += ["0" * 26, "7" + "Z" * 25]  # the least and the greatest ULID
    assert sorted(ids, key=keys.head_name) == sorted(ids, reverse=True)
    assert all(keys.head_id_of(keys.head_name(checkpoint_id)) == checkpoint_id for checkpoint_id in ids)
    assert all(keys.head_name(checkpoint_id) > keys.HEAD_NAMES_AFTER for checkpoint_id in ids)
    for stray in ("not-an-id", ids[0], f"{keys.head_name(ids[0])}.partial", "R" * 25 + "I", "Q" + "0" * 25):  # an id is not a head name
        assert keys.head_id_of(stray) is None, stray


def lists(requests: list[Request]) -> list[Request]:
    """The listing requests (S3: list-type=2; GCS: GET .../o with no object name)."""
    return [r for r in requests if "list-type" in r[2] or (r[0] == "GET" and r[1].endswith("/o"))]


@pytest.fixture(params=["s3", "gcs"])
def object_store(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> tuple[RemoteSpec, Callable[[dict[str, bytes]], None], Callable[[], contextlib.AbstractContextManager[list[Request]]]]:
    """A fresh S3 or GCS remote: its spec, a way to plant keys under its root, and a request counter."""
    if request.param == "s3":
        moto: MotoServer = request.getfixturevalue("moto_server")
        spec = make_s3_spec(moto)
        return spec, lambda objects: plant_s3(spec, objects), lambda: moto_requests(moto)
    gcs: GcsServer = request.getfixturevalue("gcs_server")
    spec = make_gcs_spec(gcs)
    return spec, lambda objects: plant_gcs(gcs, spec, objects, monkeypatch), lambda: gcs_requests(monkeypatch)


@pytest.mark.parametrize("history", [10, 10_000])
def test_head_lookup_is_one_request_of_one_key_whatever_the_history(tmp_path: Path, object_store: Any, history: int) -> None:
    spec, plant, requests = object_store
    day_ago = time.time() - 86400
    old = [str(ULID.from_timestamp(day_ago + n)) for n in range(history - 1)]
    plant(head_keys("r", random.sample(old, len(old))))  # a long history of heads, a day old
    with agentfs.open(tmp_path / "s", durability="process") as store:
        newest = store.run("r").commit({"step": "newest"})
        Pusher(store.engine, PackRemote(spec.url, spec.storage_options)).push()  # the real pusher names the newest head key
    remote = open_remote(spec.url, spec.storage_options)
    with requests() as seen:
        assert remote.head_id("r") == newest.id
    listed = lists(seen)
    assert len(listed) == 1, seen
    size = listed[0][2].get("max-keys") or listed[0][2].get("maxResults")
    assert size == ["1"], listed  # the request asks for one key (moto honours it; the emulator lists all)
    read = [r for r in seen if r not in listed]
    assert len(read) == 2 and all(r[0] == "GET" for r in read), seen  # the head key, the one pack index it names

    with requests() as seen, agentfs.open(tmp_path / "other", remote=spec.url, storage_options=spec.storage_options) as other:
        assert other.run("r").latest().state == {"step": "newest"}  # type: ignore[union-attr]
    assert len(lists(seen)) == 2, seen  # a resume lists the run's head keys and its retirement records: one request each


def pushed_remote(spec: RemoteSpec, tmp_path: Path) -> PackRemote:
    """The remote after a push of another run (a remote without a config is refused)."""
    with agentfs.open(tmp_path / "pusher", durability="process") as store:
        store.run("other").commit({})
        Pusher(store.engine, PackRemote(spec.url, spec.storage_options)).push()
    return open_remote(spec.url, spec.storage_options)


def test_head_lookup_of_an_empty_run_is_one_request(object_store: Any, tmp_path: Path) -> None:
    spec, _plant, requests = object_store
    remote = pushed_remote(spec, tmp_path)
    with requests() as seen:
        assert remote.head_id("nothing/here") is None
    assert len(seen) == 1 and lists(seen) == seen, seen


def test_stray_keys_beside_head_keys_are_passed_over(object_store: Any, tmp_path: Path) -> None:
    """A damaged or hostile remote: names no head key has, before and among the head names, cost requests, never the answer."""
    spec, plant, requests = object_store
    ids = sorted(str(ULID.from_timestamp(time.time() - n)) for n in range(5))
    head_dir = "/".join(keys.head_dir_key("r"))
    names = ("0-before-every-head-name", "R-sorts-first", "R" * 25 + "I", f"{keys.head_name(ids[0])}/nested")
    strays = {f"{head_dir}/{name}": b"{}" for name in names}
    plant({**head_keys("r", ids), **strays})
    remote = pushed_remote(spec, tmp_path)
    with requests() as seen:
        assert remote.head_id("r") == ids[-1]
    assert 1 <= len(lists(seen)) <= 3, seen  # the first pages of one key hold strays; then a page of many


def test_a_head_key_named_by_an_earlier_draft_is_refused_not_read_as_no_head(object_store: Any, tmp_path: Path) -> None:
    """Head keys of an unreleased draft of format 2 were named by the plain id: a resume from such a remote
    must not find the run without work; it is refused, naming the key, in the one listing request."""
    spec, plant, requests = object_store
    draft = new_id()
    plant({"/".join((*keys.head_dir_key("r"), draft)): encode_head("r", draft, [])})
    remote = pushed_remote(spec, tmp_path)
    with requests() as seen, pytest.raises(agentfs.FormatError, match=f"run 'r': head key {draft} is named as by an unreleased draft"):
        remote.head_id("r")
    assert len(lists(seen)) == 1, seen
    with pytest.raises(agentfs.FormatError, match=draft):
        agentfs.open(tmp_path / "resumed", remote=spec.url, storage_options=spec.storage_options).run("r").latest()


def test_file_remote_lists_its_head_keys_once(tmp_path: Path) -> None:
    spec = make_file_spec(tmp_path)
    with agentfs.open(tmp_path / "s", durability="process") as store:
        run = store.run("r")
        for step in range(3):
            newest = run.commit({"step": step})
        Pusher(store.engine, PackRemote(spec.url, spec.storage_options)).push()
    remote = open_remote(spec.url, spec.storage_options)
    (Path(remote.transport.key(*keys.head_dir_key("r"))) / "0-stray").write_bytes(b"x")
    assert remote.head_id("r") == newest.id


def push_from_a_clock_ahead(spec: RemoteSpec, store: Path, offset: str) -> str:
    """Commit and push from a process whose clock is `offset` ahead (libfaketime); the checkpoint's id."""
    script = (
        "import json, sys, agentfs\n"
        "from agentfs.sync.pack_remote import PackRemote\n"
        "from agentfs.sync.push import Pusher\n"
        "url, options, path = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]\n"
        "with agentfs.open(path, durability='process') as store:\n"
        "    cp = store.run('r').commit({'from': 'ahead'})\n"
        "    Pusher(store.engine, PackRemote(url, options)).push()\n"
        "print(cp.id)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, spec.url, json.dumps(spec.storage_options), str(store)],
        env=skewed_env(offset),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return done.stdout.strip()


def test_a_head_from_a_clock_ahead_is_found_and_hides_no_newer_work(object_store: Any, tmp_path: Path) -> None:
    spec, _plant, requests = object_store
    with agentfs.open(tmp_path / "here", durability="process") as here:
        here.run("r").commit({"from": "here, before"})
        Pusher(here.engine, PackRemote(spec.url, spec.storage_options)).push()
    ahead = push_from_a_clock_ahead(spec, tmp_path / "ahead", "+1h")
    assert ahead > str(ULID.from_timestamp(time.time() + 3000))  # its id is from an hour ahead of ours

    remote = open_remote(spec.url, spec.storage_options)
    with requests() as seen:
        assert remote.head_id("r") == ahead
    assert len(lists(seen)) == 1, seen

    # a machine with our clock resumes from it and commits on top: its id sorts after the one from the future
    with agentfs.open(tmp_path / "resumed", remote=spec.url, storage_options=spec.storage_options) as resumed:
        run = resumed.run("r")
        assert run.latest().state == {"from": "ahead"}  # type: ignore[union-attr]
        newer = run.commit({"from": "here, after"})
        Pusher(resumed.engine, PackRemote(spec.url, spec.storage_options)).push()
    assert newer.id > ahead
    remote = open_remote(spec.url, spec.storage_options)
    with requests() as seen:
        assert remote.head_id("r") == newer.id
    assert len(lists(seen)) == 1, seen
