"""Sync on every backend: one conformance class run against file://, memory://,
S3 (moto) and GCS (gcp-storage-emulator), plus push-ordering tests that stop the pusher after every
single remote write.

Everything read back goes through a *fresh* store (another directory, "another machine") or through
raw reads of the remote, never through the writer's memory.

The GCS emulator serves one request at a time: GCS tests push with 4 workers. moto and the emulator
take ~20 ms a request, so the resume test pushes 1,000 checkpoints on file:// and memory:// but 100 on
S3 and GCS (10 vs 100 shows the same thing there: the reads do not grow with history).
"""

from __future__ import annotations

import dataclasses
import json
import random
import re
import shutil
import threading
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgpack
import pytest

import agentfs
from agentfs.cli.main import main as cli_main
from agentfs.format import codec, keys, kinds
from agentfs.format.config import REMOTE_FORMAT
from agentfs.format.entries import Entry, decode_entry_at
from agentfs.format.keys import JOURNAL_RECORDS, LOG_RECORDS, RETIRED_RECORDS
from agentfs.format.pack import decode_pack_index
from agentfs.format.refs import EntryAddress, InlineRef, LooseRef, PackedRef, Ref
from agentfs.ids import new_id
from agentfs.names import ID
from agentfs.sync.pack_remote import PackRemote
from agentfs.sync.pull import pull
from agentfs.sync.push import Pusher, PushStats
from agentfs.sync.remote import Remote
from tests.helpers import remote_raw
from tests.servers import RemoteSpec, make_file_spec

OBJECT_KEY = r"objects/[0-9a-f]{2}/[0-9a-f]{62}"
REMOTE_KEY = r"config|packs/[0-9a-f]{16}\.(pack|idx)|heads/[0-9a-f]{64}/[R-TV-Z][0-9A-HJKMNP-TV-Z]{25}"  # keys.head_name
ENTRY_KEY = r"runs/[A-Za-z0-9._/-]+/log/[0-9A-HJKMNP-TV-Z]{26}"
SYSTEM = "You are a careful research agent. Cite every source you use. " * 12  # ~700 bytes: packed
GCS_WORKERS = 4


# --- helpers ---------------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class Expected:
    state: Any
    artifacts: dict[str, bytes]
    metadata: dict[str, Any]
    parent: str | None


def workers(spec: RemoteSpec) -> int:
    return GCS_WORKERS if spec.kind == "gcs" else 16


def remote_of(spec: RemoteSpec, suffix: str = "") -> PackRemote:
    return PackRemote(spec.url + suffix, spec.storage_options)


def push(store: agentfs.Store, spec: RemoteSpec, remote: PackRemote | None = None) -> PushStats:
    return Pusher(store.engine, remote or remote_of(spec), workers=workers(spec)).push()


def open_remote_store(path: Path, spec: RemoteSpec, suffix: str = "") -> agentfs.Store:
    return agentfs.open(path, remote=spec.url + suffix, storage_options=spec.storage_options)


def raw_files(spec: RemoteSpec, suffix: str = "") -> dict[str, bytes]:
    """Every key on the remote (relative to its root) with its bytes, read raw."""
    fs, root = spec.connect()
    prefix = (root.rstrip("/") + suffix).rstrip("/") + "/"
    try:
        found = fs.find(prefix.rstrip("/"))
    except FileNotFoundError:
        return {}
    return {key[len(prefix) :]: bytes(fs.cat_file(key)) for key in sorted(found)}


def record_name(kind: int, key: bytes) -> str:
    """A record's name as local_files names it: objects/<2 hex>/<62 hex>, runs/<run>/<kind>/<id>."""
    if kind == kinds.OBJECT:
        return f"objects/{key.hex()[:2]}/{key.hex()[2:]}"
    run, record_id = kinds.split_pair_key(key, "")
    return f"runs/{run}/{ {kinds.ENTRY: LOG_RECORDS, kinds.JOURNAL: JOURNAL_RECORDS, kinds.RETIRED: RETIRED_RECORDS}[kind] }/{record_id}"


def remote_files(spec: RemoteSpec, suffix: str = "") -> dict[str, bytes]:
    """What a reader finds on the remote, read raw: its config, and every record a pack index names
    (each record's bytes read from its pack's frame), by record_name."""
    fs, root = spec.connect()
    base = (root.rstrip("/") + suffix).rstrip("/")
    try:
        files = {"config": bytes(fs.cat_file(f"{base}/config"))}
    except FileNotFoundError:
        files = {}
    for (kind, key), _frame in remote_raw.frames(fs, base).items():
        files[record_name(kind, key)] = remote_raw.record_body(fs, base, kind, key)
    return files


def local_files(store: agentfs.Store) -> dict[str, bytes]:
    """What a push must put on the remote: every object file and log entry, under its remote key."""
    files = {}
    for oid in store.engine.db.oids():
        name = oid.hex()
        files[f"objects/{name[:2]}/{name[2:]}"] = store.engine.db.read_raw(oid)
    for run, checkpoint_id in store.engine.local_entries():
        files[f"runs/{run}/log/{checkpoint_id}"] = store.engine.local_entry(run, checkpoint_id) or b""
    return files


def entry_keys(files: dict[str, bytes]) -> set[str]:
    return {key for key in files if key.startswith("runs/")}


def build_workload(store: agentfs.Store) -> dict[EntryAddress, Expected]:
    """Three runs: packed, inline and chunked values, a small (packed) and a >1 MB (multi-chunk) artifact, a fork."""
    rng = random.Random(7)
    big = rng.randbytes(1_100_000)
    memory = rng.randbytes(40_000)  # a state value over the pack limit: a tree of small chunks
    expected: dict[EntryAddress, Expected] = {}

    def commit(run: agentfs.Run, state: Any, artifacts: dict[str, bytes], metadata: dict[str, Any]) -> agentfs.Checkpoint:
        cp = run.commit(state, artifacts=artifacts, metadata=metadata)
        expected[(run.name, cp.id)] = Expected(state, artifacts, metadata, cp.parent)
        return cp

    main = store.run("agent/main")
    messages = [{"role": "user", "content": "find three papers on CDC chunking"}]
    commit(
        main,
        {"step": 1, "system": SYSTEM, "messages": messages, "memory": memory},
        {"notes.md": b"# notes\n" * 100, "big.bin": big},
        {"source": "conformance", "step": 1},
    )
    messages = [*messages, {"role": "assistant", "content": "FastCDC (2016), its 2020 successor, and Rabin."}]
    c2 = commit(
        main,
        {"step": 2, "system": SYSTEM, "messages": messages, "memory": memory},
        {"notes.md": b"# notes\n" * 100 + b"- FastCDC\n", "big.bin": big},
        {"source": "conformance", "step": 2},
    )
    edited = big[:600_000] + b"an edit in the middle" + big[600_000:]
    commit(
        main,
        {"step": 3, "system": SYSTEM, "messages": messages, "memory": memory + b"more"},
        {"notes.md": b"# notes\n" * 100 + b"- FastCDC\n", "big.bin": edited},
        {"source": "conformance", "step": 3},
    )

    fork = main.fork(c2.id, "agent/fork")
    first = fork.latest()
    assert first is not None
    previous = expected[(main.name, c2.id)]
    expected[(fork.name, first.id)] = dataclasses.replace(previous, parent=None)
    commit(
        fork,
        {"step": 3, "system": SYSTEM, "messages": [*messages, {"role": "user", "content": "only Rabin"}], "memory": memory},
        {"notes.md": b"# notes\n" * 100 + b"- FastCDC\n", "big.bin": big},
        {"source": "fork"},
    )

    commit(store.run("other"), ["a", "whole", "value", 3, 2.5, None, b"\x00raw"], {}, {})
    return expected


def assert_store_matches(store: agentfs.Store, expected: dict[EntryAddress, Expected]) -> None:
    """Runs, latest, history, exact state, metadata and artifacts are what was committed."""
    runs = sorted({run for run, _ in expected})
    assert store.runs() == runs
    for run in runs:
        ids = sorted(checkpoint_id for name, checkpoint_id in expected if name == run)
        latest = store.run(run).latest()
        assert latest is not None and latest.id == ids[-1]
        history = store.run(run).history()
        assert [cp.id for cp in history] == ids[::-1]
        for cp in history:
            want = expected[(run, cp.id)]
            assert cp.state == want.state
            assert repr(cp.state) == repr(want.state)  # type-exact: 1 is not 1.0 is not True
            assert cp.metadata == want.metadata
            assert cp.parent == want.parent
            assert sorted(cp.artifacts) == sorted(want.artifacts)
            for name, data in want.artifacts.items():
                assert cp.artifacts[name].read_bytes() == data, f"{run}@{cp.id} artifact {name}"


def tree_missing(files: dict[str, bytes], oid: bytes, depth: int, where: str) -> list[str]:
    key = f"objects/{oid.hex()[:2]}/{oid.hex()[2:]}"
    if key not in files:
        return [f"{where}: tree node {key} is not on the remote"]
    children = msgpack.unpackb(codec.decode(files[key], oid, key), raw=False)
    missing = []
    for child, _size in children:
        if depth > 1:
            missing += tree_missing(files, child, depth - 1, where)
        elif f"objects/{child.hex()[:2]}/{child.hex()[2:]}" not in files:
            missing.append(f"{where}: chunk {child.hex()} is not on the remote")
    return missing


def ref_missing(files: dict[str, bytes], home: EntryAddress, entry: Entry, ref: Ref, where: str) -> list[str]:
    """What the remote lacks (`files`: its records, read raw) for one ref of the entry at `home`."""
    if isinstance(ref, InlineRef):
        return []
    if isinstance(ref, PackedRef):
        if ref.entry is None or ref.entry == home:
            entry.packed(ref.oid, where)
            return []
        key = f"runs/{ref.entry[0]}/log/{ref.entry[1]}"
        if key not in files:
            return [f"{where}: borrows from {key}, which is not on the remote"]
        decode_entry_at(files[key], *ref.entry, key).packed(ref.oid, where)
        return []
    if isinstance(ref, LooseRef):
        key = f"objects/{ref.oid.hex()[:2]}/{ref.oid.hex()[2:]}"
        return [] if key in files else [f"{where}: object {key} is not on the remote"]
    return tree_missing(files, ref.oid, ref.depth, where)


def assert_every_remote_entry_is_complete(spec: RemoteSpec, suffix: str, reader_dir: Path) -> int:
    """A reader's view: each log entry a pack index names decodes, and all it needs is there. Returns the count."""
    files = remote_files(spec, suffix)
    complete = []
    for key in sorted(entry_keys(files)):
        parts = key.split("/")
        assert len(parts) >= 4 and parts[-2] == "log" and ID.fullmatch(parts[-1]), f"unexpected record {key}"
        home = ("/".join(parts[1:-2]), parts[-1])
        entry = decode_entry_at(files[key], *home, key)
        assert (entry.manifest.run, entry.manifest.id) == home
        missing = [m for label, ref in entry.refs() for m in ref_missing(files, home, entry, ref, f"{key} {label}")]
        assert not missing, missing
        complete.append(home)
    if "config" not in files:  # a push stopped before its first write: not a remote yet, and a reader says so
        assert not complete
        with pytest.raises(agentfs.RemoteError, match="holds no agentfs store"):
            open_remote_store(reader_dir, spec, suffix)
        return 0
    # and through the public API of a store on another machine: every visible checkpoint loads in full
    with open_remote_store(reader_dir, spec, suffix) as reader:
        seen = []
        for run in reader.runs():
            for cp in reader.run(run).history():
                assert cp.state is not None
                for artifact in cp.artifacts.values():
                    assert len(artifact.read_bytes()) == artifact.size
                seen.append((run, cp.id))
        assert sorted(seen) == sorted(complete)
    return len(complete)


class Stopped(Exception):
    """Raised by StopAfter: the pusher "dies" before its (k+1)-th remote write."""


class StoppingTransport(Remote):
    """A transport that accepts `allowed` writes, then refuses every further one (a crash, seen from the remote)."""

    def __init__(self, url: str, storage_options: dict[str, Any], allowed: int) -> None:
        super().__init__(url, storage_options)
        self.allowed = allowed
        self.writes: list[str] = []
        self._lock = threading.Lock()

    def create(self, key: str, data: bytes, *, compare: bool = True) -> bool:
        with self._lock:
            if len(self.writes) >= self.allowed:
                raise Stopped(f"stopped before writing {key}")
            self.writes.append(key)
        return super().create(key, data, compare=compare)


class StopAfter(PackRemote):
    """A remote whose transport accepts `allowed` writes, then refuses every further one."""

    def __init__(self, url: str, storage_options: dict[str, Any], allowed: int) -> None:
        super().__init__(url, storage_options)
        self.transport = stopping = StoppingTransport(url, storage_options, allowed)
        self.writes = stopping.writes


class CountingTransport(Remote):
    def __init__(self, url: str, storage_options: dict[str, Any]) -> None:
        super().__init__(url, storage_options)
        self.creates: list[str] = []

    def create(self, key: str, data: bytes, *, compare: bool = True) -> bool:
        self.creates.append(key)
        return super().create(key, data, compare=compare)


class CountingRemote(PackRemote):
    """A remote whose transport notes the keys it creates."""

    def __init__(self, url: str, storage_options: dict[str, Any]) -> None:
        super().__init__(url, storage_options)
        self.transport = counting = CountingTransport(url, storage_options)
        self.creates = counting.creates


def commit_steps(run: agentfs.Run, count: int, model: bytes, memory: bytes) -> None:
    """An agent loop: a constant system prompt and memory, a sliding window of recent messages, a model file."""
    for step in range(count):
        recent = [f"message {j}: the agent thought about step {j} for a while" for j in range(max(0, step - 3), step + 1)]
        run.commit({"step": step, "system": SYSTEM, "memory": memory, "recent": recent}, artifacts={"model.bin": model})


@dataclasses.dataclass(frozen=True)
class Resumed:
    state: Any
    model: bytes
    installed: list[str]  # log entries the resume put into the local store


def count_resume(path: Path, spec: RemoteSpec, run: str, monkeypatch: pytest.MonkeyPatch) -> tuple[Counter[str], Resumed]:
    """Resume `run` on a fresh store; count remote reads by kind, and LIST calls (Remote's and fsspec's)."""
    calls: Counter[str] = Counter()

    def counted(name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(self: PackRemote | Remote, *args: Any, **kwargs: Any) -> Any:
            if isinstance(self, Remote):  # the transport's read: of a head key, a pack index or another key
                relative = args[0][len(self.root) + 1 :]
                kind = "head" if relative.startswith(keys.HEADS) else "index" if relative.startswith(keys.PACKS) else "other"
                calls[f"read {kind}"] += 1
            else:
                calls[name] += 1
            return method(self, *args, **kwargs)

        return wrapper

    def counted_fs(name: str, method: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            calls[name] += 1
            return method(*args, **kwargs)

        return wrapper

    with monkeypatch.context() as patch:
        patch.setattr(Remote, "read", counted("read", Remote.read))
        for name in ("list_ids", "list_runs", "list_all_entries", "read_body"):
            patch.setattr(PackRemote, name, counted(name, getattr(PackRemote, name)))
        with open_remote_store(path, spec) as store:
            assert isinstance(store.engine.source, PackRemote)
            fs = store.engine.source.transport.fs
            for name in ("ls", "find", "cat_file"):
                patch.setattr(fs, name, counted_fs(f"fs.{name}", getattr(fs, name)))
            cp = store.run(run).latest()
            assert cp is not None
            state = cp.state
            model = cp.artifacts["model.bin"].read_bytes()
            installed = sorted(checkpoint_id for _run, checkpoint_id in store.engine.local_entries())
    return calls, Resumed(state, model, installed)


RESUME_RUNS = {"short": 10, "medium": 100, "long": 1000}


@pytest.fixture(scope="module")
def resume_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store with runs of 10, 100 and 1,000 checkpoints, committed once and copied by each backend's test."""
    path = tmp_path_factory.mktemp("resume") / "store"
    rng = random.Random(5)
    model, memory = rng.randbytes(40_000), rng.randbytes(20_000)  # one loose object; a tree of small chunks
    with agentfs.open(path, durability="process") as store:
        for run, count in RESUME_RUNS.items():
            commit_steps(store.run(run), count, model, memory)
    return path


# --- the conformance class: every test runs on file, memory, s3 and gcs -----------------------------


class TestRemoteConformance:
    def test_push_lays_out_the_remote_and_a_fresh_store_sees_everything(self, remote: RemoteSpec, tmp_path: Path) -> None:
        with agentfs.open(tmp_path / "a") as store:
            expected = build_workload(store)
            stats = push(store, remote)
            local = local_files(store)
            config = store.engine.config
        assert stats.entries == len(expected)
        assert stats.objects == len(local) - len(expected)

        # the layout, read raw: config, packs/<16 hex>.pack and .idx, heads/<digest(run)>/<inverted ULID>
        for key in raw_files(remote):
            assert re.fullmatch(REMOTE_KEY, key), key
        # and the records the pack indexes name: byte for byte the store's
        files = remote_files(remote)
        remote_config = json.loads(files.pop("config"))
        assert "store_id" not in remote_config  # the remote is not one store's
        assert remote_config == {k: v for k, v in config.items() if k != "store_id"} | {"format": REMOTE_FORMAT}
        assert files == local
        for key in files:
            assert re.fullmatch(OBJECT_KEY, key) or re.fullmatch(ENTRY_KEY, key), key

        with open_remote_store(tmp_path / "b", remote) as other:
            assert_store_matches(other, expected)
            # nothing was fetched that does not verify, and what was fetched is a consistent partial store
            report = other.verify()
            assert report.ok, str(report)

    def test_pull_fills_an_empty_store_that_then_works_offline(self, remote: RemoteSpec, tmp_path: Path) -> None:
        with agentfs.open(tmp_path / "a") as store:
            expected = build_workload(store)
            push(store, remote)
            local = local_files(store)
        with agentfs.open(tmp_path / "b") as empty:
            stats = pull(empty.engine, remote_of(remote), workers=workers(remote))
            assert stats.entries == len(expected)
            report = empty.verify()
            assert report.ok, str(report)
            assert report.entries == len(expected)
            assert local_files(empty) == local
        with agentfs.open(tmp_path / "b") as offline:  # no remote: everything is local now
            assert offline.engine.source is None
            assert_store_matches(offline, expected)
        # pulling again fetches nothing
        with agentfs.open(tmp_path / "b") as again:
            stats = pull(again.engine, remote_of(remote), workers=workers(remote))
            assert (stats.entries, stats.objects) == (0, 0)

    def test_second_push_and_a_restarted_pusher_upload_nothing(self, remote: RemoteSpec, tmp_path: Path) -> None:
        with agentfs.open(tmp_path / "a") as store:
            build_workload(store)
            first = Pusher(store.engine, remote_of(remote), workers=workers(remote))
            assert first.push().entries > 0
            again = first.push()
            assert (again.entries, again.objects, again.bytes) == (0, 0, 0)

            index = store.engine.remotes_dir / remote_of(remote).transport.name
            assert (index / "objects").is_file() and (index / "entries").is_file()
            restarted_remote = CountingRemote(remote.url, remote.storage_options)
            restarted = Pusher(store.engine, restarted_remote, workers=workers(remote)).push()
            assert (restarted.entries, restarted.objects, restarted.bytes) == (0, 0, 0)
            assert restarted_remote.creates == []  # the persistent index answered: nothing re-sent

            # one more commit: only its own new data goes up
            store.run("agent/main").commit({"step": 4, "system": SYSTEM})
            counting = CountingRemote(remote.url, remote.storage_options)
            stats = Pusher(store.engine, counting, workers=workers(remote)).push()
            assert stats.entries == 1 and stats.objects == 0
            new = store.run("agent/main").latest()
            assert new is not None
            config = counting.transport.key("config")
            pack, index, head = [key for key in counting.creates if key != config]  # one pack, its index, one head
            assert pack.endswith(keys.PACK_SUFFIX) and index == pack[: -len(keys.PACK_SUFFIX)] + keys.PACK_INDEX_SUFFIX
            assert head == counting.transport.key(*keys.head_key("agent/main", new.id))
            pack_id = pack.rsplit("/", 1)[-1][: -len(keys.PACK_SUFFIX)]
            held = decode_pack_index(bytes(counting.transport.fs.cat_file(index)), pack_id, index)[1]
            assert [(entry.kind, entry.key) for entry in held] == [(kinds.ENTRY, kinds.pair_key("agent/main", new.id))]

    def test_push_after_pull_uploads_nothing(self, remote: RemoteSpec, tmp_path: Path) -> None:
        """A store that pulled everything from a remote holds nothing that remote lacks: pushing back sends no bytes."""
        with agentfs.open(tmp_path / "a") as store:
            small_workload(store)
            push(store, remote)
        with agentfs.open(tmp_path / "b") as pulled:
            pull(pulled.engine, remote_of(remote), workers=workers(remote))
            before = raw_files(remote)
            counting = CountingRemote(remote.url, remote.storage_options)
            stats = Pusher(pulled.engine, counting, workers=workers(remote)).push()
            assert raw_files(remote) == before
            uploads = [key for key in counting.creates if key != counting.transport.key("config")]
            assert (stats.entries, stats.objects, stats.bytes) == (0, 0, 0), stats
            assert uploads == [], f"{len(uploads)} keys the remote already holds were sent again"

    def test_daemon_pushes_every_commit(self, remote: RemoteSpec, tmp_path: Path) -> None:
        rng = random.Random(3)
        with agentfs.open(tmp_path / "a", durability="process") as store:
            with store.sync(remote.url, storage_options=remote.storage_options, workers=workers(remote)) as daemon:
                run = store.run("daemon/run")
                for step in range(6):
                    artifacts = {"out.bin": rng.randbytes(30_000)} if step % 2 else {}
                    run.commit({"step": step, "system": SYSTEM}, artifacts=artifacts)
                assert daemon.flush(30)
                status = daemon.status()
                assert status["lag_checkpoints"] == 0 and status["last_error"] is None
            local = local_files(store)
        files = remote_files(remote)
        assert entry_keys(local) == entry_keys(files) and len(entry_keys(files)) == 6
        assert {key: files[key] for key in local} == local
        with open_remote_store(tmp_path / "b", remote) as other:
            latest = other.run("daemon/run").latest()
            assert latest is not None and latest.state == {"step": 5, "system": SYSTEM}

    def test_nothing_on_the_remote_is_ever_overwritten(self, remote: RemoteSpec, tmp_path: Path) -> None:
        with agentfs.open(tmp_path / "a") as store:
            small_workload(store)
            push(store, remote)
            before, records_before = raw_files(remote), remote_files(remote)
            # more commits, pushed by a new pusher and by a second store that pulled the same data
            store.run("main").commit({"step": 9, "system": SYSTEM})
            push(store, remote)
        with agentfs.open(tmp_path / "b") as second:
            pull(second.engine, remote_of(remote), workers=workers(remote))
            second.run("main").commit({"step": 10, "system": SYSTEM})
            push(second, remote)
        after = raw_files(remote)
        assert {key: after.get(key) for key in before} == before
        records_after = remote_files(remote)
        assert {key: records_after.get(key) for key in records_before} == records_before
        assert len(entry_keys(records_after)) == len(entry_keys(records_before)) + 2

        if remote.kind != "gcs":  # the GCS emulator ignores create-only conditions (tests/servers.py)
            r = remote_of(remote)
            taken = [key for key in sorted(before) if key.startswith((keys.PACKS, keys.HEADS))]
            assert {key.rsplit(".", 1)[-1] for key in taken if key.startswith(keys.PACKS)} == {"pack", "idx"}
            for key in taken:  # other bytes under a taken key are an error, never taken for ours
                with pytest.raises(agentfs.RemoteError, match="already exists with other bytes"):
                    r.transport.create(r.transport.key(*key.split("/")), b"someone else's bytes")
                assert r.transport.create(r.transport.key(*key.split("/")), after[key]) is False  # the same bytes: already there
            assert raw_files(remote) == after

    def test_resume_reads_do_not_grow_with_history(
        self, remote: RemoteSpec, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, resume_template: Path
    ) -> None:
        # moto and the GCS emulator take ~20 ms a request: 100 checkpoints there, 1,000 on file:// and memory://
        long_run = "long" if remote.kind in ("file", "memory") else "medium"
        shutil.copytree(resume_template, tmp_path / "a")
        with agentfs.open(tmp_path / "a", durability="process") as store:
            store.run("long" if long_run == "medium" else "medium").delete()  # the run this remote does not hold
            stats = push(store, remote)
            assert stats.entries == 10 + RESUME_RUNS[long_run]
        short, short_resumed = count_resume(tmp_path / "r-short", remote, "short", monkeypatch)
        long, long_resumed = count_resume(tmp_path / "r-long", remote, long_run, monkeypatch)
        print(f"\n[resume {remote.kind}] 10: {dict(short)}\n[resume {remote.kind}] {RESUME_RUNS[long_run]}: {dict(long)}")
        assert short_resumed.state["step"] == 9 and long_resumed.state["step"] == RESUME_RUNS[long_run] - 1
        assert short_resumed.model == long_resumed.model
        assert short_resumed.state["memory"] == long_resumed.state["memory"]
        assert short_resumed.state["system"] == long_resumed.state["system"] == SYSTEM
        # requests: the head key, the pack indexes it names, ranged reads of frames; listings: none of the history
        reads = ("read head", "read index", "read other", "fs.ls", "fs.find", "list_ids", "list_runs", "list_all_entries")
        assert {k: short[k] for k in reads} == {k: long[k] for k in reads}
        assert long["read head"] == 1 and long["read_body"] == short["read_body"]
        assert long["fs.cat_file"] <= short["fs.cat_file"] + 1  # read-ahead may split one range differently
        assert len(short_resumed.installed) == len(long_resumed.installed) <= 3  # only what latest() needs

    def test_a_resumed_store_continues_and_pushes_back(self, remote: RemoteSpec, tmp_path: Path) -> None:
        """Machine B resumes from the remote, commits, and syncs to the same remote (the cross-machine example)."""
        rng = random.Random(11)
        with agentfs.open(tmp_path / "a") as store:
            run = store.run("job")
            run.commit({"step": 0, "system": SYSTEM}, artifacts={"first.bin": rng.randbytes(30_000)})
            run.commit({"step": 1, "system": SYSTEM})  # borrows "system" from step 0's entry
            push(store, remote)
        with open_remote_store(tmp_path / "b", remote) as resumed:
            latest = resumed.run("job").latest()
            assert latest is not None and latest.state == {"step": 1, "system": SYSTEM}
            resumed.run("job").commit({"step": 2, "system": SYSTEM})
            stats = push(resumed, remote)  # fails today: see the report (entries fetched for reading are pushed back)
            assert stats.entries >= 1
        with open_remote_store(tmp_path / "c", remote) as third:
            head = third.run("job").latest()
            assert head is not None and head.state == {"step": 2, "system": SYSTEM}

    def test_two_writers_on_one_run_fork_and_keep_everything(
        self, remote: RemoteSpec, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        a = agentfs.open(tmp_path / "a")
        b = agentfs.open(tmp_path / "b")
        with a, b:
            root = a.run("shared").commit({"step": 1, "system": SYSTEM, "by": "a"})
            push(a, remote)
            pull(b.engine, remote_of(remote), ["shared"], workers=workers(remote))
            from_a = a.run("shared").commit({"step": 2, "system": SYSTEM, "by": "a"})
            from_b = b.run("shared").commit({"step": 2, "system": SYSTEM, "by": "b"})
            assert from_a.parent == from_b.parent == root.id
            push(b, remote)
            push(a, remote)
            # then both sync with daemons at once, each continuing its own branch
            with (
                a.sync(remote.url, storage_options=remote.storage_options, workers=workers(remote)) as daemon_a,
                b.sync(remote.url, storage_options=remote.storage_options, workers=workers(remote)) as daemon_b,
            ):
                for step in range(3, 6):
                    a.run("shared").commit({"step": step, "system": SYSTEM, "by": "a"})
                    b.run("shared").commit({"step": step, "system": SYSTEM, "by": "b"})
                assert daemon_a.flush(30) and daemon_b.flush(30)
            local = {**local_files(a), **local_files(b)}
            assert local_files(a)[f"runs/shared/log/{root.id}"] == local_files(b)[f"runs/shared/log/{root.id}"]
        files = remote_files(remote)
        assert entry_keys(files) == entry_keys(local) and len(entry_keys(files)) == 1 + 2 * 4
        assert {key: files[key] for key in local} == local  # none lost, none overwritten: byte for byte
        with open_remote_store(tmp_path / "c", remote) as reader:
            history = reader.run("shared").history()
            assert len(history) == 9
            parents = Counter(cp.parent for cp in history)
            assert parents[root.id] == 2  # the fork: two checkpoints with the same parent
            assert {cp.id for cp in history if cp.parent == root.id} == {from_a.id, from_b.id}
            latest = reader.run("shared").latest()
            assert latest is not None and latest.id == max(cp.id for cp in history)
            assert reader.verify().ok
        # and `agentfs log` reports the fork, on a store that pulled the run
        with agentfs.open(tmp_path / "d") as pulled:
            pull(pulled.engine, remote_of(remote), workers=workers(remote))
        capsys.readouterr()
        assert cli_main(["--store", str(tmp_path / "d"), "log", "shared", "--json"]) == 0
        logged = {cp["id"]: cp for cp in json.loads(capsys.readouterr().out)["checkpoints"]}
        assert logged[from_a.id]["siblings"] == [from_b.id] and logged[from_b.id]["siblings"] == [from_a.id]


# --- ordering: stop the pusher after every single remote write -------------------------


def small_workload(store: agentfs.Store) -> None:
    """Every kind of write in few of them: a loose object, a tree node and its chunks, packed and borrowed objects, a fork."""
    rng = random.Random(13)
    main = store.run("main")
    c1 = main.commit({"system": SYSTEM, "n": 1}, artifacts={"small.bin": rng.randbytes(20_000)})
    main.commit({"system": SYSTEM, "n": 2}, artifacts={"pair.bin": rng.randbytes(40_000)})  # a tree node and 2 chunks
    side = main.fork(c1.id, "side")  # borrows c1's packed objects from another run
    side.commit({"system": SYSTEM, "n": 3, "note": "x" * 300})


@pytest.mark.parametrize("remote", ["file", "memory", "s3"], indirect=True)
def test_a_push_stopped_after_any_write_never_exposes_an_entry_without_its_data(remote: RemoteSpec, tmp_path: Path) -> None:
    with agentfs.open(tmp_path / "a") as store:
        small_workload(store)
        local = local_files(store)
        counting = StopAfter(remote.url + "/count", remote.storage_options, allowed=10**9)
        Pusher(store.engine, counting).push()
        total = len(counting.writes)
        assert len(set(counting.writes)) == total and total >= 4  # config, pack(s), their indexes, head keys: each written once
        for allowed in range(total + 1):
            suffix = f"/stop-{allowed}"
            stopping = StopAfter(remote.url + suffix, remote.storage_options, allowed)
            if allowed < total:
                with pytest.raises(Stopped):
                    Pusher(store.engine, stopping).push()
            else:
                Pusher(store.engine, stopping).push()
            assert len(stopping.writes) == allowed
            complete = assert_every_remote_entry_is_complete(remote, suffix, tmp_path / f"reader-{allowed}")
            if allowed == total:
                assert complete == len(entry_keys(local))
            # a new pusher (a restart) finishes the job
            Pusher(store.engine, remote_of(remote, suffix)).push()
            assert remote_files(remote, suffix).keys() == {"config", *local}, f"stop at write {allowed}"
        files = remote_files(remote, f"/stop-{total // 2}")
        files.pop("config")
        assert files == local
    with agentfs.open(tmp_path / "pulled") as pulled:
        pull(pulled.engine, remote_of(remote, f"/stop-{total // 2}"))
        assert pulled.verify().ok
        assert local_files(pulled) == local


# --- create-only and torn uploads on file:// remotes -------------------------------------------------


def test_file_remote_partial_upload_leaves_no_complete_looking_key(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    spec = make_file_spec(tmp_path)
    remote = Remote(spec.url, spec.storage_options)
    data = codec.encode(b"payload " * 1000)
    key = remote.key(*keys.pack_key("0123456789abcdef"))
    real_pipe = remote.fs.pipe_file

    def torn(path: str, value: bytes, **kwargs: Any) -> None:
        real_pipe(path, value[: len(value) // 2], **kwargs)
        raise OSError("disk full")

    monkeypatch.setattr(remote.fs, "pipe_file", torn)
    with pytest.raises(OSError, match="disk full"):
        remote.create(key, data)
    monkeypatch.undo()
    assert not remote.fs.exists(key)
    assert remote.create(key, data) is True
    assert remote.fs.cat_file(key) == data


def test_file_remote_create_never_replaces_a_key_created_meanwhile(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two machines create the same key: between one's existence check and its rename, the other creates it."""
    spec = make_file_spec(tmp_path)
    first = Remote(spec.url, spec.storage_options)
    second = Remote(spec.url, spec.storage_options)
    key = first.key(*keys.head_key("shared", new_id()))
    real_link = first.fs.link
    results: dict[str, bool] = {}
    raced = threading.Event()

    def racing_link(path1: str, path2: str, **kwargs: Any) -> None:
        if not raced.is_set():
            raced.set()
            results["second"] = second.create(key, b"second writer")
        real_link(path1, path2, **kwargs)

    monkeypatch.setattr(first.fs, "link", racing_link)
    with pytest.raises(agentfs.RemoteError, match="already exists with other bytes"):  # the loser finds other bytes
        first.create(key, b"first writer")
    assert raced.is_set() and results == {"second": True}
    assert first.fs.cat_file(key) == b"second writer"
