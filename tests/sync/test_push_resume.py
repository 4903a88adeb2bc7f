"""Interrupted pushes resume and leak nothing; a remote that lost data is noticed; one corrupt record holds back only what needs it.

The kill test SIGKILLs a real `agentfs sync` at random points of a push to moto through a forwarder
that counts every byte sent (tests/helpers/byte_counter.py). In `make test` it pushes RESUME_BYTES
(default 64 MB) and kills it RESUME_KILLS times (default 2); the full size (300 MB, 10 kills)
is `AGENTFS_RESUME_BYTES=300000000 AGENTFS_RESUME_KILLS=10` (`make test-push-stress`). A kill wastes
at most the packs in flight (pack_upload.IN_FLIGHT x PACK_TARGET, 8 MiB; a pack is in flight until its index
is up), so both sizes stay under the 1.3x bound whatever the kill points.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import agentfs
from agentfs.format import keys, kinds
from agentfs.format.pack import encode_pack
from agentfs.format.segment import Record
from agentfs.sync.pack_remote import PackRemote
from agentfs.sync.remote import Remote
from tests.cli.test_cli import COMMAND, cli, json_of
from tests.helpers import raw, remote_raw
from tests.helpers.byte_counter import ByteCounter
from tests.servers import MotoServer, RemoteSpec, make_file_spec, make_s3_spec, s3_storage_options

RESUME_BYTES = int(os.environ.get("AGENTFS_RESUME_BYTES", str(64_000_000)))
RESUME_KILLS = int(os.environ.get("AGENTFS_RESUME_KILLS", "2"))
OVERHEAD = 1.3  # bytes sent by the interrupted pushes together, at most this times a clean push's
BLOCK = 1 << 20


def child_env() -> dict[str, str]:
    """This process's environment now (the moto fixture sets AWS_* variables), without $AGENTFS_STORE."""
    return {key: value for key, value in os.environ.items() if key != "AGENTFS_STORE"}


def write_random(path: Path, size: int) -> str:
    """`size` incompressible bytes (os.urandom, a fast CSPRNG stream) at `path`; their sha256."""
    digest = hashlib.sha256()
    with open(path, "wb") as handle:
        for start in range(0, size, BLOCK):
            block = os.urandom(min(BLOCK, size - start))
            digest.update(block)
            handle.write(block)
    return digest.hexdigest()


@pytest.fixture
def counted_s3(moto_server: MotoServer) -> Iterator[tuple[ByteCounter, RemoteSpec]]:
    """An S3 bucket reached through a byte counter."""
    counter = ByteCounter(moto_server.host, moto_server.port)
    spec = make_s3_spec(moto_server)
    try:
        yield counter, RemoteSpec("s3", spec.url, s3_storage_options(counter.endpoint_url))
    finally:
        counter.close()


def sync_command(source: Path, spec: RemoteSpec) -> list[str]:
    return [*COMMAND, "--store", str(source), "sync", spec.url, "--storage-options", json.dumps(spec.storage_options)]


def remote_keys(spec: RemoteSpec) -> list[str]:
    fs, root = spec.connect(skip_instance_cache=True)
    return sorted(path[len(root.rstrip("/")) + 1 :] for path in fs.find(root))


def clean_push_bytes(spec: RemoteSpec) -> int:
    """What a clean push sends, but for HTTP's own bytes: the config, the packs that have an index, their indexes, head keys."""
    fs, root = spec.connect(skip_instance_cache=True)
    sizes = {path[len(root.rstrip("/")) + 1 :]: int(info["size"]) for path, info in fs.find(root, detail=True).items()}
    indexed = {Path(key).stem for key in sizes if key.endswith(keys.PACK_INDEX_SUFFIX)}
    return sum(size for key, size in sizes.items() if key == keys.CONFIG or key.startswith(f"{keys.HEADS}/") or Path(key).stem in indexed)


def held_records(spec: RemoteSpec) -> set[tuple[int, bytes]]:
    remote = PackRemote(spec.url, spec.storage_options)
    remote.catalogue.load_all()
    return set(remote.catalogue.places)


def test_a_push_killed_at_random_points_resumes_without_sending_it_again_and_leaves_nothing_behind(
    tmp_path: Path, counted_s3: tuple[ByteCounter, RemoteSpec], moto_server: MotoServer
) -> None:
    counter, spec = counted_s3
    source = tmp_path / "source"
    digests: dict[str, str] = {}
    with agentfs.open(source) as store:
        run = store.run("big")
        for step in range(3):
            artifact = tmp_path / f"artifact-{step}.bin"
            sha = write_random(artifact, RESUME_BYTES // 3)
            digests[run.commit({"step": step}, artifacts={"data.bin": artifact}).id] = sha
            artifact.unlink()
        store.run("small").commit({"note": "also pushed"})

    with agentfs.open(source) as store:  # what a clean push puts up: the store's every object and checkpoint
        local = {(kinds.OBJECT, oid) for oid in raw.object_ids(source)}
        local |= {(kinds.ENTRY, kinds.pair_key(*loc)) for loc in store.engine.local_entries()}
    expected = RESUME_BYTES  # about what a clean push sends: the artifacts (incompressible) dominate
    counter.take()
    rng = random.Random(os.environ.get("AGENTFS_RESUME_SEED"))
    killed_midway = 0
    for _kill in range(RESUME_KILLS):
        threshold = rng.uniform(0.0, 1.5 / RESUME_KILLS) * expected  # a random point of what is left
        sent_before = counter.sent
        pusher = subprocess.Popen(sync_command(source, spec), env=child_env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        while pusher.poll() is None and counter.sent - sent_before < threshold:
            time.sleep(0.002)
        killed_midway += pusher.poll() is None
        pusher.send_signal(signal.SIGKILL)
        pusher.wait()
    assert killed_midway >= RESUME_KILLS - 1  # the kills landed inside pushes, not after them
    resumed = cli("sync", spec.url, "--storage-options", json.dumps(spec.storage_options), store=source, env=child_env())
    assert resumed.returncode == 0, resumed.stderr
    sent = counter.take()
    clean_bytes = clean_push_bytes(spec)
    print(f"interrupted pushes: {killed_midway} kills, {sent} bytes sent; a clean push {clean_bytes} ({sent / clean_bytes:.3f}x)")
    assert sent <= OVERHEAD * clean_bytes, f"the interrupted pushes sent {sent} bytes, a clean push {clean_bytes}"

    # the remote holds what a clean push puts up, and every checkpoint reads back exactly on a fresh machine
    assert held_records(spec) == local
    with agentfs.open(tmp_path / "fresh", remote=spec.url, storage_options=spec.storage_options) as fresh:
        for checkpoint_id, sha in digests.items():
            with fresh.run("big").get(checkpoint_id).artifacts["data.bin"].open() as stream:
                digest = hashlib.sha256()
                while block := stream.read(BLOCK):
                    digest.update(block)
            assert digest.hexdigest() == sha

    # gc removes what the killed pushes left; then every key is one something references
    options = json.dumps(spec.storage_options)
    collected = cli(
        "gc", "--remote", spec.url, "--storage-options", options, "--grace", "0", "--settle", "3", store=source, env=child_env()
    )
    assert collected.returncode == 0, collected.stderr
    verified = cli("verify", "--remote", spec.url, "--storage-options", options, "--deep", "--json", store=source, env=child_env())
    assert verified.returncode == 0 and json_of(verified)["ok"], verified.stdout
    left = remote_keys(spec)
    packs = {key.removesuffix(keys.PACK_SUFFIX) for key in left if key.endswith(keys.PACK_SUFFIX)}
    indexes = {key.removesuffix(keys.PACK_INDEX_SUFFIX) for key in left if key.endswith(keys.PACK_INDEX_SUFFIX)}
    assert packs == indexes  # no pack without its index, nor an index without its pack
    assert not [key for key in left if key.startswith(f"{keys.TMP}/")]
    assert {key.split("/")[0] for key in left} <= {keys.CONFIG, keys.PACKS, keys.HEADS, keys.GC}


def leftover_pack(spec: RemoteSpec, mtime: float | None = None) -> str:
    """What a push killed between a pack and its index leaves: a whole pack that no index names."""
    remote = PackRemote(spec.url, spec.storage_options)
    pack = encode_pack([Record(kinds.OBJECT, os.urandom(32), os.urandom(1000))], os.urandom(16))
    key = remote.transport.key(*keys.pack_key(pack.pack_id))
    remote.transport.create(key, pack.data)
    if mtime is not None:
        os.utime(remote.transport.fs._strip_protocol(key), (mtime, mtime))
    return pack.pack_id


def test_verify_remote_reports_a_pack_without_an_index_and_gc_removes_it_only_past_the_grace_period(tmp_path: Path) -> None:
    spec = make_file_spec(tmp_path)
    with agentfs.open(tmp_path / "a") as store:
        store.run("main").commit({"step": 1})
    options = json.dumps(spec.storage_options)
    assert cli("sync", spec.url, "--storage-options", options, store=tmp_path / "a").returncode == 0
    young = leftover_pack(spec)
    old = leftover_pack(spec, mtime=time.time() - 7200)
    partial = Path(Remote(spec.url, spec.storage_options).key(keys.TMP, "cut.partial"))
    partial.write_bytes(b"half a pack")
    os.utime(partial, (time.time() - 7200, time.time() - 7200))

    verified = cli("verify", "--remote", spec.url, "--storage-options", options, "--json", store=tmp_path / "a")
    assert verified.returncode == 1
    problems = json_of(verified)["problems"]
    assert {p["kind"] for p in problems} == {"leftover"}
    assert all(any(name in p["where"] for p in problems) for name in (young, old, "cut.partial"))

    collected = cli("gc", "--remote", spec.url, "--storage-options", options, "--settle", "3", "--json", store=tmp_path / "a")
    assert collected.returncode == 0, collected.stderr
    deleted = json_of(collected)["leftovers_deleted"]
    assert any(old in key for key in deleted) and any("cut.partial" in key for key in deleted)
    assert not any(young in key for key in deleted)  # younger than the grace period: a live pusher's, perhaps
    left = remote_keys(spec)
    assert f"packs/{young}.pack" in left and f"packs/{old}.pack" not in left and "tmp/cut.partial" not in left


def test_gc_with_a_short_grace_adopts_a_young_pack_instead_of_deleting_it(tmp_path: Path) -> None:
    """A pack a push cut short left whole, younger than the adoption window: a pusher may be putting its index that
    moment, so gc with a grace period shorter than the window puts that index itself (the same bytes) rather than
    delete the pack under it; its objects, unreferenced, then go through the plan that pushers honour."""
    spec = make_file_spec(tmp_path)
    with agentfs.open(tmp_path / "a") as store:
        store.run("main").commit({"step": 1})
    options = json.dumps(spec.storage_options)
    assert cli("sync", spec.url, "--storage-options", options, store=tmp_path / "a").returncode == 0
    young = leftover_pack(spec)

    gc = ("gc", "--remote", spec.url, "--storage-options", options, "--grace", "0", "--settle", "3", "--json")
    collected = cli(*gc, store=tmp_path / "a")
    assert collected.returncode == 0, collected.stderr
    report = json_of(collected)
    assert not any(young in key for key in report["leftovers_deleted"]), "gc deleted a pack a pusher may be adopting"
    assert report["leftovers_adopted"] == [young] and report["objects_deleted"] == 1  # its object, through the plan
    left = remote_keys(spec)
    packs = {key.removesuffix(keys.PACK_SUFFIX) for key in left if key.endswith(keys.PACK_SUFFIX)}
    indexes = {key.removesuffix(keys.PACK_INDEX_SUFFIX) for key in left if key.endswith(keys.PACK_INDEX_SUFFIX)}
    assert packs == indexes and f"packs/{young}" not in packs  # repacked away whole: no pack without its index
    assert cli("verify", "--remote", spec.url, "--storage-options", options, store=tmp_path / "a").returncode == 0


def test_a_push_uploads_again_what_the_remote_lost_before_it_publishes_a_head(tmp_path: Path) -> None:
    spec = make_file_spec(tmp_path)
    options = json.dumps(spec.storage_options)
    source = tmp_path / "a"
    with agentfs.open(source) as store:
        first = store.run("main").commit({"step": 1}, artifacts={"data.bin": os.urandom(300_000)})
        oids = raw.object_ids(source)
    assert cli("sync", spec.url, "--storage-options", options, store=source).returncode == 0
    assert remote_raw.delete_packs_holding(*spec.connect(), oids) >= 1  # the remote lost the run's objects
    with agentfs.open(source) as store:
        run = store.run("main")
        run.commit({"step": 2}, parent=first.id, keep_artifacts=True)
        last = run.commit({"step": 3}, keep_artifacts=True)
    synced = cli("sync", spec.url, "--storage-options", options, store=source)
    assert synced.returncode == 0, synced.stderr
    with agentfs.open(tmp_path / "fresh", remote=spec.url, storage_options=spec.storage_options) as fresh:
        head = fresh.run("main").latest()
        assert head.id == last.id
        assert len(head.artifacts["data.bin"].read_bytes()) == 300_000
    assert "the remote had lost" in synced.stderr
    status = json_of(cli("status", "--json", store=source))["remotes"][0]
    assert status["lag_checkpoints"] == 0 and status["lost_data"]["objects"] >= 1
    assert "lost data" in cli("status", store=source).stdout


def test_a_flipped_byte_in_one_runs_artifact_holds_back_only_that_run(tmp_path: Path) -> None:
    spec = make_file_spec(tmp_path)
    options = json.dumps(spec.storage_options)
    source = tmp_path / "a"
    with agentfs.open(source) as store:
        good = store.run("good").commit({"step": 1}, artifacts={"data.bin": os.urandom(3_000_000)})
        before = raw.object_ids(source)
        bad = store.run("bad").commit({"step": 1}, artifacts={"data.bin": os.urandom(3_000_000)})
    chunk = max(raw.object_ids(source) - before, key=lambda oid: len(raw.object_bytes(source, oid)))  # one of bad's chunks
    raw.flip_in_place(source, chunk)  # the segment's bytes themselves: the frame no longer matches its checksum
    synced = cli("sync", spec.url, "--storage-options", options, store=source)
    assert synced.returncode == 4, synced.stderr
    assert f"bad@{bad.id}" in synced.stderr and "Traceback" not in synced.stderr
    assert "pushed 1 checkpoint" in synced.stdout
    status = json_of(cli("status", "--json", store=source))["remotes"][0]
    assert status["lag_checkpoints"] == 1 and f"bad@{bad.id}" in status["last_error"]
    with agentfs.open(tmp_path / "fresh", remote=spec.url, storage_options=spec.storage_options) as fresh:
        assert fresh.run("good").latest().id == good.id
        assert len(fresh.run("good").latest().artifacts["data.bin"].read_bytes()) == 3_000_000
    fs, root = spec.connect()
    assert not remote_raw.has_head(fs, root, "bad", bad.id) and remote_raw.has_head(fs, root, "good", good.id)


def test_a_whole_pack_left_without_its_index_is_indexed_by_the_next_push_not_sent_again(tmp_path: Path) -> None:
    spec = make_file_spec(tmp_path)
    options = json.dumps(spec.storage_options)
    source = tmp_path / "a"
    with agentfs.open(source) as store:
        store.run("main").commit({"step": 1}, artifacts={"data.bin": os.urandom(20 << 20)})
    assert cli("sync", spec.url, "--storage-options", options, store=source).returncode == 0
    # what a push killed after its packs of objects and before their indexes leaves: those packs alone
    remote = PackRemote(spec.url, spec.storage_options)
    remote.catalogue.load_all()
    object_packs = {pack_id for pack_id, frames in remote.catalogue.pack_frames().items() if all(f.kind == kinds.OBJECT for f in frames)}
    assert len(object_packs) >= 2
    sent = {f.key for pack_id in object_packs for f in remote.catalogue.pack_frames()[pack_id]}
    kept = {f"{keys.PACKS}/{pack_id}{keys.PACK_SUFFIX}" for pack_id in object_packs}
    for key in remote_keys(spec):
        if key.startswith((f"{keys.HEADS}/", f"{keys.PACKS}/")) and key not in kept:
            remote.transport.delete(remote.transport.key(key))
    for state in (source / "remotes").iterdir():  # nor did the killed push note what it sent
        shutil.rmtree(state)

    synced = cli("sync", spec.url, "--storage-options", options, store=source)
    assert synced.returncode == 0, synced.stderr
    left = remote_keys(spec)
    assert all(f"{keys.PACKS}/{pack_id}{keys.PACK_INDEX_SUFFIX}" in left for pack_id in object_packs)  # indexed from their own bytes
    again = PackRemote(spec.url, spec.storage_options)
    again.catalogue.load_all()
    resent = {f.key for pack_id in set(again.catalogue.pack_frames()) - object_packs for f in again.catalogue.pack_frames()[pack_id]}
    assert not sent & resent
    with agentfs.open(tmp_path / "fresh", remote=spec.url, storage_options=spec.storage_options) as fresh:
        assert len(fresh.run("main").latest().artifacts["data.bin"].read_bytes()) == 20 << 20
