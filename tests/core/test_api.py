"""The public API of DESIGN.md, call by call, asserting on the files it writes where that is the contract."""

from __future__ import annotations

import asyncio
import datetime as dt
import io
import json
import os
import pydoc
import shutil
import tempfile
import threading
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

import agentfs
from agentfs.api import copy_store
from agentfs.core.engine_api import EngineAPI
from tests.helpers import raw
from tests.servers import make_file_spec

ULID_CHARS = set("0123456789ABCDEFGHJKMNPQRSTVWXYZ")


def tree(root: Path) -> dict[str, bytes | None]:
    out: dict[str, bytes | None] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        for name in dirnames:
            out[os.path.relpath(os.path.join(dirpath, name), root)] = None
        for name in filenames:
            out[os.path.relpath(os.path.join(dirpath, name), root)] = Path(dirpath, name).read_bytes()
    return out


def _records_of(store: agentfs.Store, run: str) -> dict[tuple[str, str, str], bytes]:
    return {name: data for name, data in raw.stored_records(store).items() if name[0] == run}


# --- the Store's surface ------------------------------------------------------------------------------

# what README.md, docs/ and examples/ show users calling on a Store: the Store holds its engine
# (engine/repository.py) in `store.engine` instead of being one, so help(agentfs.Store) lists these only.
# `remote`, `retention`, `keys` and `to_thread` are what the front-ends (cli/, ui/, integrations/) asked of the
# engine before (docs/DESIGN.md, "Layers").
STORE_API = {
    "run", "runs", "verify", "gc", "set_retention", "retention", "watch", "stats", "sync", "close", "root", "id",
    "remote", "keys", "aruns", "averify", "agc", "aset_retention", "astats", "awatch", "async_sync", "to_thread",
}  # fmt: skip


def test_store_shows_only_the_documented_api_each_with_a_docstring(tmp_path: Path) -> None:
    assert {name for name in dir(agentfs.Store) if not name.startswith("_")} == STORE_API
    with agentfs.open(tmp_path / ".agentfs") as store:
        assert {name for name in dir(store) if not name.startswith("_")} == STORE_API | {"engine"}
    assert [name for name in sorted(STORE_API) if not (getattr(agentfs.Store, name).__doc__ or "").strip()] == []
    shown = pydoc.render_doc(agentfs.Store, renderer=pydoc.plaintext)
    assert all(f"{name}(" in shown or f"{name}\n" in shown for name in STORE_API)
    assert not [name for name in ("read_entry", "append_entry", "writing", "excluding_writers", "offload") if name in shown]


# everything core/ uses of the engine (core/engine_api.py, a Protocol the Repository satisfies: mypy checks it
# where api.py hands its engine to core/): an engine member that core/ starts to use is added here on purpose
ENGINE_API = {
    "id", "source", "hasher", "db", "pool", "offload", "writer", "object_writer", "watcher",
    "writing", "excluding_writers", "appending", "journal_lock",
    "heads", "index_generation", "ids", "id_slice", "head", "local_runs", "local_ids", "local_entries", "has_entry",
    "knew_entry", "read_entry", "local_entry", "read_packed", "cache_entry", "append_entry",
    "readable", "run_parents", "run_heads", "run_entries", "damaged_entries",
    "note_fork", "forks_of", "fork_relations", "retirements", "retired_ids", "retire",
    "record_ids", "poll_record_ids", "local_records", "read_record", "record_size", "append_record",
    "make_records_durable", "where_stored", "read_config", "rewrite_config",
}  # fmt: skip


def test_core_reaches_the_engine_through_the_members_its_protocol_names(tmp_path: Path) -> None:
    assert {name for name in vars(EngineAPI) if not name.startswith("_")} == ENGINE_API
    with agentfs.open(tmp_path / ".agentfs") as store:
        assert [name for name in sorted(ENGINE_API) if not hasattr(store.engine, name)] == []


# --- what the front-ends use instead of store.engine ------------------------------------------------------


def test_remote_names_the_url_a_store_was_opened_with(tmp_path: Path) -> None:
    url = make_file_spec(tmp_path).url
    with agentfs.open(tmp_path / "a") as store:
        assert store.remote is None
        store.run("r").commit({"n": 1})
        with store.sync(url, {"auto_mkdir": True}, interval=0.1) as daemon:
            assert daemon.flush(timeout=30)
        assert store.remote is None  # pushing to a remote is not fetching from it
    with agentfs.open(tmp_path / "b", remote=url) as other:
        assert other.remote == url


def test_to_thread_runs_the_call_off_the_event_loop_on_the_stores_pool(store: agentfs.Store) -> None:
    async def main() -> tuple[str, str, str]:
        call = lambda n, *, name: (threading.current_thread().name, store.run(name).commit({"n": n}).id)  # noqa: E731
        on, checkpoint_id = await store.to_thread(call, 1, name="r")
        return threading.current_thread().name, on, checkpoint_id

    loop_thread, call_thread, checkpoint_id = asyncio.run(main())
    assert call_thread != loop_thread and call_thread.startswith("agentfs-async")  # the Offloader's threads (aio.py)
    assert store.run("r").head_id() == checkpoint_id


def test_retention_reads_the_policy_set_retention_wrote(store: agentfs.Store) -> None:
    assert store.retention() is None
    store.set_retention(keep_last=3, keep_within=60)
    assert store.retention() == {"keep_last": 3, "keep_within": 60.0}
    store.set_retention()
    assert store.retention() is None


def test_run_forks_and_retired_name_what_retention_keeps_and_removed(store: agentfs.Store) -> None:
    run = store.run("a")
    first = run.commit({"n": 1})
    store.run("other").commit({"x": 1})
    forked = run.fork(first.id, "b")
    forked.fork(forked.head_id() or "", "c")
    assert run.forks() == {"b", "c"} and forked.forks() == {"c"} and store.run("other").forks() == set()
    assert run.retired() == set()
    run.commit({"n": 2})
    last = run.commit({"n": 3})
    report = run.prune(keep_last=1)  # the first stays: the forks borrow from it
    assert report.removed and run.retired() == set(report.removed) and first.id not in run.retired() and last.id not in run.retired()


def test_keys_add_and_remove_slots_of_an_encrypted_store_only(tmp_path: Path) -> None:
    with agentfs.open(tmp_path / "plain") as plain:
        assert plain.keys.master is None and plain.keys.slots() == []
        with pytest.raises(agentfs.FormatError, match="not encrypted"):
            plain.keys.new_slot(agentfs.Encryption(passphrase="p"))
    with agentfs.open(tmp_path / "secret", encryption=agentfs.Encryption(passphrase="one", scrypt_n=2**4)) as store:
        master = store.keys.master
        assert master is not None and len(store.keys.slots()) == 1
        added = store.keys.new_slot(agentfs.Encryption(passphrase="two", scrypt_n=2**4), label="test")
        store.keys.add(added)
        first = next(slot.slot_id for slot in store.keys.slots() if slot.slot_id != added.slot_id)
        store.keys.remove(first)
        assert [slot.slot_id for slot in store.keys.slots()] == [added.slot_id]
    with pytest.raises(agentfs.WrongKey):
        agentfs.open(tmp_path / "secret", encryption="one").close()
    agentfs.open(tmp_path / "secret", encryption="two").close()


def test_copy_store_copies_every_run_with_its_ids(tmp_path: Path) -> None:
    with agentfs.open(tmp_path / "a") as source, agentfs.open(tmp_path / "b") as dest:
        ids = [source.run("r").commit({"n": n}).id for n in range(3)]
        report = copy_store(source, dest)
        assert report.checkpoints == 3 and dest.run("r").ids() == ids and dest.run("r").latest().state == {"n": 2}  # type: ignore[union-attr]


# --- open -----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", [str, Path])
def test_open_creates_the_layout(tmp_path: Path, kind: type) -> None:
    root = tmp_path / "deep" / ".agentfs"
    with agentfs.open(kind(root)) as store:
        assert isinstance(store, agentfs.Store)
        for name in ("segments", "locks", "tmp", "remotes"):
            assert (root / name).is_dir(), name
        config = json.loads((root / "config").read_text())
        assert config["format"] == 2
        assert config["hash"] == "sha256"
        assert "zstd" in config["codec"]
        assert len(config["store_id"]) == 26 and set(config["store_id"]) <= ULID_CHARS
        assert config["store_id"] == store.id
        chunking = config["chunking"]
        assert "fastcdc" in chunking["algorithm"]
        for params in (chunking["small"], chunking["large"]):
            assert 0 < params["min_size"] <= params["avg_size"] <= params["max_size"]
        assert raw.temp_files(root) == []
        assert raw.object_ids(root) == set()
        assert store.runs() == []
    with agentfs.open(root) as again:
        assert again.id == store.id
        assert json.loads((root / "config").read_text()) == config


def test_open_default_path_is_dot_agentfs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with agentfs.open() as store:
        store.run("r").commit({"x": 1})
    assert (tmp_path / ".agentfs" / "config").is_file()


def test_open_refuses_a_non_empty_directory_that_is_not_a_store(tmp_path: Path) -> None:
    (tmp_path / "project").mkdir()
    (tmp_path / "project" / "notes.txt").write_text("mine")
    before = tree(tmp_path)
    with pytest.raises(agentfs.AgentFSError) as info:
        agentfs.open(tmp_path / "project")
    assert "project" in str(info.value) and "not" in str(info.value)
    assert tree(tmp_path) == before


def test_open_an_empty_existing_directory_makes_a_store(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    with agentfs.open(tmp_path / "empty") as store:
        store.run("r").commit({"ok": True})
        assert (tmp_path / "empty" / "config").is_file()


def test_invalid_durability_is_a_value_error_and_creates_nothing(tmp_path: Path) -> None:
    for bad in ("fast", "", None, "POWER"):
        with pytest.raises(ValueError):
            agentfs.open(tmp_path / "s", durability=bad)  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []


def test_process_durability_commits_and_loads(tmp_path: Path) -> None:
    with agentfs.open(tmp_path / "s", durability="process") as store:
        cp = store.run("r").commit({"x": os.urandom(40_000)}, artifacts={"a": os.urandom(300_000)})
    with agentfs.open(tmp_path / "s") as store:
        loaded = store.run("r").latest()
        assert loaded is not None and loaded.id == cp.id
        assert loaded.state == cp.state
        assert loaded.artifacts["a"].read_bytes() == cp.artifacts["a"].read_bytes()
        assert store.verify().ok


def test_a_second_open_sees_the_first_ones_commits(tmp_path: Path) -> None:
    with agentfs.open(tmp_path / "s") as first, agentfs.open(tmp_path / "s") as second:
        a = first.run("r").commit({"n": 1})
        seen = second.run("r").latest()
        assert seen is not None and seen.id == a.id and seen.state == {"n": 1}
        b = second.run("r").commit({"n": 2})
        assert b.parent == a.id
        c = first.run("r").commit({"n": 3})
        assert c.parent == b.id
        assert [cp.id for cp in first.run("r").history()] == [c.id, b.id, a.id]
        assert second.runs() == ["r"]


# --- runs and checkpoints -----------------------------------------------------------------------------


def test_empty_run(tmp_path: Path) -> None:
    with agentfs.open(tmp_path / "s") as store:
        run = store.run("research/task-42")
        assert isinstance(run, agentfs.Run)
        assert run.latest() is None
        assert run.history() == []
        assert store.runs() == []  # a run exists once it has a checkpoint
        assert raw.stored_records(store) == {}


def test_commit_latest_history_get(tmp_path: Path) -> None:
    start = dt.datetime.now(dt.timezone.utc)
    with agentfs.open(tmp_path / "s") as store:
        run = store.run("research/task-42")
        cps = [run.commit({"step": i, "messages": [{"role": "user", "text": "x" * i}] * i}, metadata={"i": i}) for i in range(5)]
        assert all(isinstance(cp, agentfs.Checkpoint) for cp in cps)
        ids = [cp.id for cp in cps]
        assert ids == sorted(ids) and len(set(ids)) == 5
        assert all(len(i) == 26 and set(i) <= ULID_CHARS for i in ids)
        assert [cp.parent for cp in cps] == [None, *ids[:-1]]
        latest = run.latest()
        assert latest is not None and latest.id == ids[-1] and latest.state == cps[-1].state
        history = run.history()
        assert [cp.id for cp in history] == ids[::-1]  # newest first
        assert [cp.state["step"] for cp in history] == [4, 3, 2, 1, 0]
        assert [cp.id for cp in run.history(limit=2)] == ids[:-3:-1]
        # the parent chain from the head walks the whole run
        chain, cp = [], latest
        while cp is not None:
            chain.append(cp.id)
            cp = run.get(cp.parent) if cp.parent else None
        assert chain == ids[::-1]
        for i, checkpoint_id in enumerate(ids):
            got = run.get(checkpoint_id)
            assert got.id == checkpoint_id
            assert got.state == {"step": i, "messages": [{"role": "user", "text": "x" * i}] * i}
            assert got.metadata == {"i": i}
        created = [cp.created for cp in history[::-1]]
        for when in created:
            assert when.tzinfo is not None and when.utcoffset() == dt.timedelta(0)
            assert start - dt.timedelta(seconds=5) <= when <= dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=5)
        assert created == sorted(created)
        assert store.runs() == ["research/task-42"]


def test_metadata_round_trips(tmp_path: Path) -> None:
    metadata = {"source": "loop", "n": 3, "ratio": 0.5, "tags": ("a", "b"), "when": dt.datetime(2024, 1, 1), "nested": {"k": [1, None]}}
    with agentfs.open(tmp_path / "s") as store:
        cp = store.run("r").commit({"x": 1}, metadata=metadata)
        plain = store.run("r").commit({"x": 2})
    with agentfs.open(tmp_path / "s") as store:
        got = store.run("r").get(cp.id).metadata
        assert got == metadata and type(got["tags"]) is tuple and type(got["when"]) is dt.datetime
        assert store.run("r").get(plain.id).metadata == {}


def test_non_dict_states(tmp_path: Path) -> None:
    with agentfs.open(tmp_path / "s") as store:
        run = store.run("r")
        for state in ([1, 2], (1, "a"), "text", 7, None, b"raw", {1: "int keys"}, {}):
            cp = run.commit(state)
            with agentfs.open(tmp_path / "s") as fresh:
                got = fresh.run("r").get(cp.id).state
            assert got == state and type(got) is type(state)


def test_commit_with_parent_is_optimistic(tmp_path: Path) -> None:
    with agentfs.open(tmp_path / "s") as store:
        run = store.run("r")
        with pytest.raises(agentfs.Conflict):
            run.commit({"x": 0}, parent="01ARZ3NDEKTSV4RRFFQ69G5FAV")
        first = run.commit({"x": 1}, parent=None)  # None: the run must be empty
        second = run.commit({"x": 2}, parent=first.id)
        before = raw.stored_records(store)
        with pytest.raises(agentfs.Conflict) as info:
            run.commit({"x": 3}, parent=first.id)
        assert isinstance(info.value, agentfs.AgentFSError) and isinstance(info.value, RuntimeError)
        assert first.id in str(info.value) and second.id in str(info.value)
        with pytest.raises(agentfs.Conflict):
            run.commit({"x": 3}, parent=None)
        assert raw.stored_records(store) == before
        assert run.latest().id == second.id


# --- artifacts ------------------------------------------------------------------------------------------


def test_artifacts_from_bytes_paths_and_files(tmp_path: Path) -> None:
    big = os.urandom(700_000)  # several chunks
    text = b"line\n" * 50_000  # compressible, chunked
    (tmp_path / "out.csv").write_bytes(text)
    (tmp_path / "big.bin").write_bytes(big)
    (tmp_path / "empty.txt").write_bytes(b"")
    sources = {
        "report.md": b"# report\n",
        "tiny": b"x",
        "empty": b"",
        "mid.bin": big[:5000],
        "big.bin": big,
        "ba.bin": bytearray(big[:100_000]),
        "data.csv": tmp_path / "out.csv",
        "str-path.bin": str(tmp_path / "big.bin"),
        "empty-path": tmp_path / "empty.txt",
        "stream.bin": io.BytesIO(big),
        "small-stream": io.BytesIO(b"abc"),
    }
    expected = {
        name: bytes(src)
        if isinstance(src, (bytes, bytearray))
        else Path(src).read_bytes()
        if isinstance(src, (str, Path))
        else src.getvalue()
        for name, src in sources.items()
    }
    with open(tmp_path / "big.bin", "rb") as handle:
        sources["file.bin"] = handle
        expected["file.bin"] = big
        with agentfs.open(tmp_path / "s") as store:
            cp = store.run("r").commit({"x": 1}, artifacts=sources)
    with agentfs.open(tmp_path / "s") as store:
        got = store.run("r").latest()
        assert got is not None and got.id == cp.id
        assert sorted(got.artifacts) == sorted(expected) and len(got.artifacts) == len(expected)
        for name, data in expected.items():
            artifact = got.artifacts[name]
            assert isinstance(artifact, agentfs.Artifact)
            assert artifact.read_bytes() == data, name
            assert artifact.size == len(data)
            with artifact.open() as stream:
                pieces = []
                while piece := stream.read(7_001):
                    assert len(piece) <= 7_001
                    pieces.append(piece)
            assert b"".join(pieces) == data, name
            target = artifact.save(tmp_path / f"saved-{name}")
            assert Path(target).read_bytes() == data
            artifact.save(str(tmp_path / f"saved-str-{name}"))
            assert (tmp_path / f"saved-str-{name}").read_bytes() == data
        leftovers = [p.name for p in tmp_path.iterdir() if "partial" in p.name]
        assert leftovers == []


def test_save_replaces_an_existing_file(tmp_path: Path) -> None:
    with agentfs.open(tmp_path / "s") as store:
        cp = store.run("r").commit({}, artifacts={"a.txt": b"new"})
    (tmp_path / "a.txt").write_bytes(b"old contents, longer")
    cp.artifacts["a.txt"].save(tmp_path / "a.txt")
    assert (tmp_path / "a.txt").read_bytes() == b"new"


def test_streaming_reads_in_small_pieces(tmp_path: Path) -> None:
    data = os.urandom(3_000_000)
    with agentfs.open(tmp_path / "s") as store:
        cp = store.run("r").commit({}, artifacts={"big": io.BytesIO(data)})
        with cp.artifacts["big"].open() as stream:
            assert stream.read(1) == data[:1]
            assert stream.read(10) == data[1:11]
            rest = bytearray()
            while piece := stream.read(1000):
                rest += piece
        assert bytes(rest) == data[11:]


def test_missing_checkpoint_and_artifact_are_not_found(tmp_path: Path) -> None:
    with agentfs.open(tmp_path / "s") as store:
        run = store.run("r")
        cp = run.commit({"x": 1}, artifacts={"a.txt": b"a"})
        missing_id = "7ZZZZZZZZZZZZZZZZZZZZZZZZZ"
        for error in (KeyError, agentfs.AgentFSError, agentfs.NotFound):
            with pytest.raises(error):
                run.get(missing_id)
            with pytest.raises(error):
                cp.artifacts["nope.txt"]
            with pytest.raises(error):
                run.fork(missing_id, "copy")
        with pytest.raises(agentfs.NotFound) as info:
            run.get(missing_id)
        assert missing_id in str(info.value) and "r" in str(info.value)
        with pytest.raises(agentfs.NotFound) as info:
            cp.artifacts["nope.txt"]
        assert "nope.txt" in str(info.value) and cp.id in str(info.value)
        assert "nope.txt" not in cp.artifacts and "a.txt" in cp.artifacts
        assert cp.artifacts.get("nope.txt") is None
        assert store.runs() == ["r"]


# --- fork -----------------------------------------------------------------------------------------------


def test_fork(tmp_path: Path) -> None:
    with agentfs.open(tmp_path / "s") as store:
        run = store.run("research/task-42")
        old = run.commit({"step": 1, "blob": os.urandom(50_000), "small": "s" * 200}, artifacts={"r.md": b"v1", "big": os.urandom(400_000)})
        head = run.commit({"step": 2}, artifacts={"r.md": b"v2"}, metadata={"m": 1})
        source_records = _records_of(store, "research/task-42")
        source_history = [cp.id for cp in run.history()]
        objects_before = raw.object_ids(store)

        forked = run.fork(head.id, "research/task-42-b")
        assert isinstance(forked, agentfs.Run)
        latest = forked.latest()
        assert latest is not None and latest.state == head.state and latest.metadata == head.metadata
        assert latest.parent is None
        assert {n: latest.artifacts[n].read_bytes() for n in latest.artifacts} == {"r.md": b"v2"}

        older = run.fork(old.id, "research/task-42-c").latest()
        assert older is not None and older.state == old.state
        assert {n: older.artifacts[n].read_bytes() for n in older.artifacts} == {n: old.artifacts[n].read_bytes() for n in old.artifacts}

        assert raw.object_ids(store) == objects_before  # no data copied
        assert _records_of(store, "research/task-42") == source_records
        assert [cp.id for cp in run.history()] == source_history
        assert sorted(store.runs()) == ["research/task-42", "research/task-42-b", "research/task-42-c"]

        nxt = forked.commit({"step": 3})
        assert nxt.parent == latest.id
        assert run.latest().id == head.id
    with agentfs.open(tmp_path / "s") as store:  # the fork survives reopening, and verifies
        got = store.run("research/task-42-c").latest()
        assert got is not None and got.state == old.state
        assert store.verify().ok


def test_fork_into_an_existing_run_is_refused(tmp_path: Path) -> None:
    with agentfs.open(tmp_path / "s") as store:
        a = store.run("a").commit({"a": 1})
        b = store.run("b").commit({"b": 1})
        with pytest.raises(agentfs.AgentFSError):
            store.run("a").fork(a.id, "b")
        assert [cp.id for cp in store.run("b").history()] == [b.id]


# --- verify and gc, as API calls (their depth is tested elsewhere) ---------------------------------------


def test_verify_and_gc_on_a_healthy_store(tmp_path: Path) -> None:
    with agentfs.open(tmp_path / "s") as store:
        for i in range(3):
            store.run("r").commit({"i": i, "blob": os.urandom(30_000)}, artifacts={"a": os.urandom(200_000)})
        report = store.verify()
        assert report.ok and bool(report) and report.problems == []
        objects = raw.object_ids(store)
        store.gc()
        assert raw.object_ids(store) == objects  # everything is referenced
        store.gc(grace=0)
        assert raw.object_ids(store) == objects
        for cp in store.run("r").history():
            assert cp.artifacts["a"].size == 200_000
            cp.state  # noqa: B018


# --- stateful: the API against a model ------------------------------------------------------------------

small_states = st.dictionaries(
    st.sampled_from(["step", "messages", "scratch", "k"]),
    st.one_of(
        st.integers(-(2**63), 2**63 - 1), st.text(max_size=30), st.lists(st.text(max_size=300), max_size=5), st.binary(max_size=3000)
    ),
    max_size=4,
) | st.lists(st.integers(0, 1000), max_size=3)
artifact_sets = st.dictionaries(
    st.sampled_from(["a.txt", "dir/b.bin", "c"]), st.binary(max_size=2000) | st.just(40_000).map(lambda n: b"z" * n), max_size=2
)
RUNS = ["main", "team/one", "team/two"]


class StoreMachine(RuleBasedStateMachine):
    """Commits, forks, reopens and stale commits, checked against a plain model of every run."""

    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="agentfs-stateful-"))
        self.store = agentfs.open(self.dir / "s", durability="process")
        self.model: dict[str, list[tuple[str, Any, dict[str, bytes], dict[str, Any]]]] = {}
        self.forks = 0

    def teardown(self) -> None:
        self.store.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    @rule(
        run=st.sampled_from(RUNS),
        state=small_states,
        artifacts=artifact_sets,
        meta=st.dictionaries(st.text(max_size=5), st.integers(-(2**63), 2**63 - 1), max_size=2),
    )
    def commit(self, run: str, state: Any, artifacts: dict[str, bytes], meta: dict[str, Any]) -> None:
        history = self.model.setdefault(run, [])
        cp = self.store.run(run).commit(state, artifacts=artifacts, metadata=meta)
        assert cp.parent == (history[-1][0] if history else None)
        history.append((cp.id, state, artifacts, meta))

    @precondition(lambda self: any(self.model.values()))
    @rule(data=st.data())
    def fork(self, data: st.DataObject) -> None:
        run = data.draw(st.sampled_from(sorted(r for r, h in self.model.items() if h)))
        index = data.draw(st.integers(0, len(self.model[run]) - 1))
        checkpoint_id, state, artifacts, meta = self.model[run][index]
        self.forks += 1
        name = f"forks/f{self.forks}"
        forked = self.store.run(run).fork(checkpoint_id, name)
        latest = forked.latest()
        assert latest is not None
        self.model[name] = [(latest.id, state, artifacts, meta)]

    @precondition(lambda self: any(len(h) >= 2 for h in self.model.values()))
    @rule(data=st.data())
    def stale_commit(self, data: st.DataObject) -> None:
        run = data.draw(st.sampled_from(sorted(r for r, h in self.model.items() if len(h) >= 2)))
        stale = self.model[run][data.draw(st.integers(0, len(self.model[run]) - 2))][0]
        with pytest.raises(agentfs.Conflict):
            self.store.run(run).commit({"stale": True}, parent=stale)

    @rule()
    def reopen(self) -> None:
        self.store.close()
        self.store = agentfs.open(self.dir / "s", durability="process")

    @invariant()
    def matches_model(self) -> None:
        assert self.store.runs() == sorted(r for r, h in self.model.items() if h)
        for run, history in self.model.items():
            got = self.store.run(run).history()
            assert [cp.id for cp in got] == [h[0] for h in reversed(history)]
            if history:
                checkpoint_id, state, artifacts, meta = history[-1]
                latest = self.store.run(run).latest()
                assert latest is not None and latest.id == checkpoint_id
                assert latest.state == state and type(latest.state) is type(state)
                assert latest.metadata == meta
                assert {n: latest.artifacts[n].read_bytes() for n in latest.artifacts} == artifacts


TestStoreMachine = StoreMachine.TestCase
TestStoreMachine.settings = settings(max_examples=15, stateful_step_count=12, deadline=None)


def test_stateful_machine_checks_something() -> None:
    """Guard against a machine whose rules never run: one fixed sequence, by hand."""
    machine = StoreMachine()
    try:
        machine.commit("main", {"k": 1}, {"a.txt": b"x"}, {})
        machine.commit("main", {"k": 2}, {}, {"m": 1})
        machine.matches_model()
        machine.model["main"][-1] = (machine.model["main"][-1][0], {"k": 999}, {}, {"m": 1})
        with pytest.raises(AssertionError):
            machine.matches_model()
    finally:
        machine.teardown()
