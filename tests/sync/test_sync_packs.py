"""Format 2's remote: packs, pack indexes, head keys, on real files and moto's S3.

A push puts the new records up as packs whose records are byte-identical to the local store's,
then their indexes, then one head key per run whose head moved; a store opened on that remote
resumes by ranged reads, verifying every record; a format-1 remote is refused with a clear line.
"""

from __future__ import annotations

import json
import os
import posixpath
from pathlib import Path
from typing import Any

import pytest

import agentfs
from agentfs.errors import FormatError, IntegrityError, RemoteError
from agentfs.format import keys, kinds
from agentfs.format.config import encode_config, remote_config
from agentfs.format.pack import decode_pack_index
from agentfs.format.segment import decode_record
from agentfs.format.walk import reach
from agentfs.sync.pack_remote import PackRemote
from agentfs.sync.pull import pull
from agentfs.sync.push import Pusher
from agentfs.sync.reconcile import recheck
from agentfs.sync.remote import Remote
from agentfs.sync.remote_gc import MIN_SETTLE, remote_gc
from tests.cli.test_cli import cli
from tests.helpers import raw
from tests.servers import MotoServer, make_s3_spec


class RecordingTransport(Remote):
    """A real Remote that notes the keys it creates, in order."""

    def __init__(self, url: str, storage_options: dict[str, Any]) -> None:
        super().__init__(url, storage_options)
        self.created: list[str] = []

    def create(self, key: str, data: bytes, *, compare: bool = True) -> bool:
        created = super().create(key, data, compare=compare)
        self.created.append(posixpath.relpath(key, self.root))
        return created


class Recorder(PackRemote):
    """A real PackRemote whose transport notes the keys it creates, in order."""

    def __init__(self, url: str, storage_options: dict[str, Any]) -> None:
        super().__init__(url, storage_options)
        self.transport = recording = RecordingTransport(url, storage_options)
        self.created = recording.created


def test_a_pack_remote_holds_its_transport_rather_than_being_one(tmp_path: Path) -> None:
    """What a remote's keys mean (PackRemote) and how bytes move (Remote, the fsspec plumbing) stay apart:
    a PackRemote shares no member with its transport but the URL its messages name."""
    remote = PackRemote(str(tmp_path / "remote"), {})
    assert isinstance(remote.transport, Remote) and not isinstance(remote, Remote)
    shared = {name for name in dir(remote.transport) if not name.startswith("_")} & set(dir(remote))
    assert shared == {"url"} and remote.url == remote.transport.url


def commit_history(store: agentfs.Store) -> dict[str, Any]:
    a, b = store.run("agent/a"), store.run("b")
    for step in range(5):
        a.commit({"step": step, "notes": ["x" * 50] * step})
    b.commit({"b": 1}, artifacts={"blob.bin": os.urandom(300_000)})
    fork = a.fork(a.head_id() or "", "agent/c")
    fork.commit({"forked": True})
    return {run: store.run(run).latest().state for run in ("agent/a", "b", "agent/c")}


def remote_keys(root: Path) -> list[str]:
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file() and keys.TMP not in p.relative_to(root).parts)


def test_push_puts_packs_then_indexes_then_heads_with_local_record_bytes(tmp_path: Path) -> None:
    store = agentfs.open(tmp_path / "a")
    commit_history(store)
    remote = Recorder(str(tmp_path / "remote"), {})
    stats = Pusher(store.engine, remote).push()
    assert stats.entries == len(list(store.engine.local_entries())) and stats.refused == []

    kinds_in_order = [key.split("/")[0] + ("/idx" if key.endswith(".idx") else "") for key in remote.created]
    assert kinds_in_order[0] == keys.CONFIG
    order = {"packs": 0, "packs/idx": 1, "heads": 2}
    ranks = [order[kind] for kind in kinds_in_order[1:]]
    assert ranks == sorted(ranks) and set(ranks) == {0, 1, 2}, remote.created
    heads = [key for key in remote.created if key.startswith("heads/")]
    assert sorted(heads) == sorted("/".join(keys.head_key(run, store.run(run).head_id() or "")) for run in store.runs())

    packs = [key for key in remote_keys(tmp_path / "remote") if key.endswith(".pack")]
    assert packs and len(packs) == len([key for key in remote.created if key.endswith(".idx")])
    held: dict[tuple[int, bytes], bytes] = {}
    for pack in packs:
        data = (tmp_path / "remote" / pack).read_bytes()
        index = (tmp_path / "remote" / pack.replace(".pack", ".idx")).read_bytes()
        assert data.endswith(index)  # the index is the pack's footer and trailer
        size, frames = decode_pack_index(index, Path(pack).stem, pack)
        assert size == len(data)
        for frame in frames:
            record = decode_record(data[frame.offset : frame.offset + frame.length], pack)
            held[(record.kind, record.key)] = record.body
    for run, checkpoint_id in store.engine.local_entries():
        assert held[(kinds.ENTRY, kinds.pair_key(run, checkpoint_id))] == store.engine.local_entry(run, checkpoint_id)
    objects = {key: body for (kind, key), body in held.items() if kind == kinds.OBJECT}
    assert objects and all(body == store.engine.db.read_raw(oid) for oid, body in objects.items())

    again = Pusher(store.engine, Recorder(str(tmp_path / "remote"), {})).push()
    assert (again.entries, again.objects) == (0, 0)  # the push index knows what is up


def test_a_store_opened_on_the_remote_resumes_every_run_by_ranged_reads(tmp_path: Path) -> None:
    source = agentfs.open(tmp_path / "a")
    states = commit_history(source)
    artifact = source.run("b").latest().artifacts["blob.bin"].read_bytes()
    url = str(tmp_path / "remote")
    Pusher(source.engine, PackRemote(url, {})).push()

    resumed = agentfs.open(tmp_path / "b", remote=url)
    assert isinstance(resumed.engine.source, PackRemote)
    assert {run: resumed.run(run).latest().state for run in states} == states
    assert resumed.run("b").latest().artifacts["blob.bin"].read_bytes() == artifact
    assert resumed.run("agent/a").head_id() == source.run("agent/a").head_id()
    assert resumed.runs() == source.runs()
    cached = resumed.engine.remote_state_dir(resumed.engine.source.transport.name) / keys.PACKS
    assert sorted(p.name for p in cached.glob("*.idx")) == sorted(p.name for p in (tmp_path / "remote" / "packs").glob("*.idx"))


def test_a_damaged_pack_is_refused_and_nothing_of_it_enters_the_store(tmp_path: Path) -> None:
    source = agentfs.open(tmp_path / "a")
    cp = source.run("r").commit({"r": 1}, artifacts={"blob.bin": os.urandom(200_000)})
    url = str(tmp_path / "remote")
    Pusher(source.engine, PackRemote(url, {})).push()
    (pack,) = (tmp_path / "remote" / "packs").glob("*.pack")
    data = bytearray(pack.read_bytes())
    data[len(data) // 3] ^= 0xFF  # inside an object's frame: its checksum no longer matches
    pack.chmod(0o644)
    pack.write_bytes(bytes(data))
    reader = agentfs.open(tmp_path / "b", remote=url)
    with pytest.raises((IntegrityError, FormatError)):
        reader.run("r").get(cp.id).artifacts["blob.bin"].read_bytes()


def test_a_format_1_remote_is_refused_with_a_line_saying_push_to_a_fresh_url(tmp_path: Path) -> None:
    store = agentfs.open(tmp_path / "a")
    store.run("r").commit({"r": 1})
    url = str(tmp_path / "old")
    old = tmp_path / "old"  # a format-1 remote's config (older agentfs wrote one key per record beside it)
    old.mkdir()
    (old / keys.CONFIG).write_bytes(encode_config({**remote_config(store.engine.config), "format": 1}))
    with pytest.raises(FormatError, match=r"format-1 remote.*push to a fresh URL"):
        PackRemote(url, {}).identify()
    store.run("r").commit({"r": 2})
    with pytest.raises(FormatError, match="format-1 remote"):
        Pusher(store.engine, PackRemote(url, {})).push()
    assert not (tmp_path / "old" / keys.PACKS).exists()  # nothing written into it


def test_a_head_key_that_exists_with_other_content_is_refused(tmp_path: Path) -> None:
    store = agentfs.open(tmp_path / "a")
    cp = store.run("r").commit({"r": 1})
    remote = PackRemote(str(tmp_path / "remote"), {})
    taken = remote.transport.key(*keys.head_key("r", cp.id))
    remote.transport.fs.makedirs(posixpath.dirname(taken), exist_ok=True)
    remote.transport.fs.pipe_file(taken, b'{"format": 2, "run": "other", "id": "x", "packs": []}')
    with pytest.raises(FormatError, match="not the checkpoint its key names"):
        Pusher(store.engine, remote).push()


def test_resume_of_an_artifact_on_s3_costs_requests_by_range_not_by_chunk(tmp_path: Path, moto_server: MotoServer) -> None:
    spec = make_s3_spec(moto_server)
    source = agentfs.open(tmp_path / "a", durability="process")
    blob = os.urandom(24 << 20)
    for step in range(20):  # a history the resume must not pay for
        source.run("r").commit({"step": step})
    cp = source.run("r").commit({"final": True}, artifacts={"big.bin": blob})
    chunks = sum(1 for _ in source.engine.db.oids())
    Pusher(source.engine, PackRemote(spec.url, spec.storage_options)).push()

    reader = agentfs.open(tmp_path / "b", remote=spec.url, storage_options=spec.storage_options, durability="process")
    assert isinstance(reader.engine.source, PackRemote)
    requests: list[str] = []
    for name in ("cat_file", "ls", "call_s3", "exists"):
        real = getattr(reader.engine.source.transport.fs, name)

        def counting(*args: Any, _real: Any = real, _name: str = name, **kwargs: Any) -> Any:
            requests.append(_name)
            return _real(*args, **kwargs)

        setattr(reader.engine.source.transport.fs, name, counting)
    latest = reader.run("r").latest()
    assert latest.id == cp.id and latest.artifacts["big.bin"].read_bytes() == blob
    assert len(requests) <= 60 < chunks, f"{len(requests)} requests for {chunks} objects: {requests}"


def test_remote_errors_name_the_url(tmp_path: Path) -> None:
    with pytest.raises(RemoteError, match="holds no agentfs store"):
        agentfs.open(tmp_path / "b", remote=str(tmp_path / "nothing-here"))


def test_the_daemon_push_pull_and_clone_work_over_a_format_2_remote(tmp_path: Path) -> None:
    store = agentfs.open(tmp_path / "a")
    states = commit_history(store)
    url = str(tmp_path / "remote")
    Pusher(store.engine, PackRemote(url, {})).push()  # a new remote is format 2
    cp = store.run("agent/a").commit({"after": "the first push"})
    states["agent/a"] = cp.state
    with store.sync(url, interval=0.2) as daemon:
        assert daemon.flush(timeout=20)
    assert (tmp_path / "remote").joinpath(*keys.head_key("agent/a", cp.id)).is_file()

    pulled = cli("pull", url, store=tmp_path / "b" / ".agentfs")
    assert pulled.returncode == 0, pulled.stderr
    cloned = cli("clone", url, str(tmp_path / "c"))
    assert cloned.returncode == 0, cloned.stderr
    for directory in (tmp_path / "b" / ".agentfs", tmp_path / "c"):
        with agentfs.open(directory) as copy:
            assert copy.engine.source is None and {run: copy.run(run).latest().state for run in states} == states


def test_a_recheck_finds_a_lost_pack_and_pushes_its_records_again(tmp_path: Path) -> None:
    store = agentfs.open(tmp_path / "a")
    states = commit_history(store)
    remote_dir = tmp_path / "remote"
    pusher = Pusher(store.engine, PackRemote(str(remote_dir), {}), pack_target=100_000)  # several packs
    pusher.push()
    packs = sorted((remote_dir / keys.PACKS).glob("*.pack"))
    assert len(packs) > 1
    lost = packs[-1]  # the last pack holds the entries
    lost.unlink()
    lost.with_suffix(keys.PACK_INDEX_SUFFIX).unlink()

    report = recheck(Pusher(store.engine, PackRemote(str(remote_dir), {})))
    assert report.lost_entries + report.lost_objects > 0 and report.pushed.entries + report.pushed.objects > 0
    with agentfs.open(tmp_path / "b", remote=str(remote_dir)) as resumed:
        assert {run: resumed.run(run).latest().state for run in states} == states
        assert resumed.run("b").latest().artifacts["blob.bin"].read_bytes() == store.run("b").latest().artifacts["blob.bin"].read_bytes()


def test_verify_remote_reports_a_damaged_record_of_a_pack_and_checks_the_rest(tmp_path: Path) -> None:
    store = agentfs.open(tmp_path / "a")
    commit_history(store)
    url = str(tmp_path / "remote")
    Pusher(store.engine, PackRemote(url, {})).push()
    clean = cli("verify", "--remote", url, "--deep", "--json")
    assert clean.returncode == 0, clean.stdout + clean.stderr

    (pack,) = (tmp_path / "remote" / keys.PACKS).glob("*.pack")
    _size, frames = decode_pack_index(pack.with_suffix(keys.PACK_INDEX_SUFFIX).read_bytes(), pack.stem, "test")
    chunk = max((frame for frame in frames if frame.kind == kinds.OBJECT), key=lambda frame: frame.length)
    data = bytearray(pack.read_bytes())
    data[chunk.offset + chunk.length // 2] ^= 0xFF
    pack.write_bytes(bytes(data))
    damaged = cli("verify", "--remote", url, "--deep", "--json")
    assert damaged.returncode != 0
    problems = json.loads(damaged.stdout)["problems"]
    assert problems and all(problem["kind"] == "corrupt" for problem in problems)
    assert {problem["where"].split(" ")[0] for problem in problems} == {f"b@{store.run('b').head_id()}"}  # only what uses it


def test_retirement_propagates_over_packs(tmp_path: Path) -> None:
    store = agentfs.open(tmp_path / "a")
    run = store.run("r")
    ids = [run.commit({"step": step}).id for step in range(6)]
    url = str(tmp_path / "remote")
    Pusher(store.engine, PackRemote(url, {})).push()  # all six go up
    run.prune(keep_last=2)
    assert Pusher(store.engine, PackRemote(url, {})).push().records == 1  # then the retirement record
    with agentfs.open(tmp_path / "b", remote=url) as reader:
        assert reader.run("r").ids() == ids[-2:]
        with pytest.raises(agentfs.NotFound):
            reader.run("r").get(ids[0])


def test_remote_gc_repacks_what_stays_and_frees_what_retention_removed(tmp_path: Path) -> None:
    store = agentfs.open(tmp_path / "a")
    run = store.run("r")
    run.commit({"step": 0}, artifacts={"old.bin": os.urandom(400_000)})
    for step in range(1, 6):
        run.commit({"step": step})
    kept = store.run("other").commit({"other": True}, artifacts={"kept.bin": os.urandom(100_000)})
    url = str(tmp_path / "remote")
    Pusher(store.engine, PackRemote(url, {})).push()
    run.prune(keep_last=2)
    Pusher(store.engine, PackRemote(url, {})).push()  # the retirement record
    remote_dir = tmp_path / "remote"
    before = sum(p.stat().st_size for p in (remote_dir / keys.PACKS).glob("*.pack"))

    report = remote_gc(PackRemote(url, {}), grace=0.0, settle=MIN_SETTLE)
    assert report.entries_deleted == 4 and report.objects_deleted > 0 and report.packs_deleted
    after = sorted((remote_dir / keys.PACKS).glob("*.pack"))
    assert before - sum(p.stat().st_size for p in after) == report.bytes_freed > 400_000
    assert {p.stem for p in after} == {p.stem for p in (remote_dir / keys.PACKS).glob("*.idx")}  # every pack has its index
    assert not set(report.packs_deleted) & {p.stem for p in after}

    verified = cli("verify", "--remote", url, "--deep", "--json")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    with agentfs.open(tmp_path / "b", remote=url) as reader:
        assert reader.run("r").latest().state == {"step": 5} and len(reader.run("r").ids()) == 2
        assert reader.run("other").latest().artifacts["kept.bin"].read_bytes() == kept.artifacts["kept.bin"].read_bytes()


def test_divergence_over_packs_is_reported_by_pull_and_latest_stays_newest(tmp_path: Path) -> None:
    url = str(tmp_path / "remote")
    origin = agentfs.open(tmp_path / "origin")
    base = origin.run("shared").commit({"step": 0})
    Pusher(origin.engine, PackRemote(url, {})).push()
    machines = [agentfs.open(tmp_path / name, remote=url) for name in ("a", "b")]
    heads = [machine.run("shared").commit({"by": n}, parent=base.id).id for n, machine in enumerate(machines)]  # both saw base
    for machine in machines:
        Pusher(machine.engine, PackRemote(url, {})).push()
    with agentfs.open(tmp_path / "c") as puller:
        stats = pull(puller.engine, PackRemote(url, {}))
        assert stats.diverged == {"shared": sorted(heads)}
        assert puller.run("shared").latest().id == max(heads)


def test_repair_from_a_pack_whose_copy_is_damaged_too_reports_it_and_repairs_the_rest(tmp_path: Path) -> None:
    store = agentfs.open(tmp_path / "a")
    # Past twice the largest chunk (chunking.LARGE, 768 KiB), so the artifact is at least three
    # objects whatever the random bytes; at 300 KB one chunk happened (CI, stop 15).
    cp = store.run("r").commit({"r": 1}, artifacts={"big.bin": os.urandom(1_600_000)})
    url = str(tmp_path / "remote")
    Pusher(store.engine, PackRemote(url, {})).push()
    (pack,) = (tmp_path / "remote" / keys.PACKS).glob("*.pack")
    _size, frames = decode_pack_index(pack.with_suffix(keys.PACK_INDEX_SUFFIX).read_bytes(), pack.stem, "test")
    objects = [frame for frame in frames if frame.kind == kinds.OBJECT]
    both, here_only = objects[0], objects[1]
    data = bytearray(pack.read_bytes())
    data[both.offset + both.length // 2] ^= 0xFF
    pack.write_bytes(bytes(data))
    raw.corrupt_object(store, both.key)
    raw.corrupt_object(store, here_only.key)

    result = cli("verify", "--repair", "--remote", url, store=tmp_path / "a")
    assert f"repaired object {here_only.key.hex()}" in result.stderr
    assert f"not repaired: object {both.key.hex()}" in result.stderr and "Traceback" not in result.stderr
    store.engine.db.read(here_only.key)  # verified: the pack's copy replaced the damaged one
    with pytest.raises(IntegrityError):
        store.engine.db.read(both.key)  # left as it was: no good copy anywhere
    assert cp.id == store.run("r").head_id()


def test_resume_reads_no_pack_index_but_those_its_head_key_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = agentfs.open(tmp_path / "a", durability="process")
    url = str(tmp_path / "remote")
    pusher = Pusher(store.engine, PackRemote(url, {}))
    run = store.run("r")
    for step in range(30):  # one push per commit, as a daemon does: 30 packs of history
        run.commit({"step": step})
        if step == 20:
            run.prune(keep_last=5)
        pusher.push()
    assert len(list((tmp_path / "remote" / keys.PACKS).glob("*.idx"))) >= 30
    reader = agentfs.open(tmp_path / "b", remote=url)
    assert isinstance(reader.engine.source, PackRemote)
    monkeypatch.setattr(reader.engine.source.catalogue, "pack_ids", lambda: pytest.fail("resume listed every pack"))
    latest = reader.run("r").latest()
    assert latest is not None and latest.state == {"step": 29}
    assert len(list((reader.engine.remote_state_dir(reader.engine.source.transport.name) / keys.PACKS).glob("*.idx"))) <= 2
    monkeypatch.undo()
    assert reader.run("r").ids() == store.run("r").ids()  # retired ids stay hidden


def test_every_pack_index_goes_up_after_those_of_what_its_entries_need(tmp_path: Path) -> None:
    """A reader of every index (pull) never sees an entry before the objects and entries it needs.

    Tiny packs spread one batch over many; an entry's index must follow the indexes of the packs
    holding its objects and the entries it borrows from (pack_upload.py, put_indexes, and push.py, borrowed_first).
    """
    store = agentfs.open(tmp_path / "a")
    run = store.run("r")
    for step in range(30):  # each commit borrows its unchanged packed values from an earlier entry
        run.commit({"fixed": "y" * 300, "step": step, "notes": ["x" * 40] * step})
    run.fork(run.head_id() or "", "f").commit({"forked": True})
    remote = Recorder(str(tmp_path / "remote"), {})
    Pusher(store.engine, remote, pack_target=1_000).push()

    published: set[tuple[int, bytes]] = set()
    indexes = [key for key in remote.created if key.endswith(".idx")]
    assert len(indexes) > 5
    for key in indexes:
        _size, frames = decode_pack_index((tmp_path / "remote" / key).read_bytes(), Path(key).stem, key)
        published.update((frame.kind, frame.key) for frame in frames)
        for frame in frames:
            if frame.kind != kinds.ENTRY:
                continue
            loc = kinds.split_pair_key(frame.key, key)
            entry = store.engine.read_entry(*loc)
            needs = {(kinds.ENTRY, kinds.pair_key(*dep)) for dep in entry.borrowed()}
            needs |= {(kinds.OBJECT, r.oid) for r in reach(entry.refs(), store.engine.db.read_nodes, set())}
            assert needs <= published, f"{key} names {loc} before what it needs"
