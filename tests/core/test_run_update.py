"""run.update() under real contention, carrying artifacts forward, reusing an Artifact as a source."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import agentfs
from tests.helpers import raw

UPDATES = 200
COUNTER = textwrap.dedent(
    """
    import sys
    import agentfs

    with agentfs.open(sys.argv[1], durability="process") as store:
        run = store.run("counter")
        sys.stdin.readline()  # released together with the other writer
        for _ in range(int(sys.argv[2])):
            run.update(lambda state: {"count": (state or {"count": 0})["count"] + 1})
    """
)


def test_update_from_two_processes_loses_no_increment(tmp_path: Path) -> None:
    root = tmp_path / ".agentfs"
    agentfs.open(root).close()
    writers = [
        subprocess.Popen([sys.executable, "-c", COUNTER, str(root), str(UPDATES)], stdin=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(2)
    ]
    for writer in writers:
        assert writer.stdin is not None
        writer.stdin.write("go\n")
        writer.stdin.flush()
    for writer in writers:
        _out, err = writer.communicate(timeout=120)
        assert writer.returncode == 0, err
    with agentfs.open(root) as store:
        run = store.run("counter")
        latest = run.latest()
        assert latest is not None and latest.state == {"count": 2 * UPDATES}
        assert len(run.ids()) == 2 * UPDATES
        counts = [run.get(checkpoint_id).state["count"] for checkpoint_id in run.ids()]
        assert counts == list(range(1, 2 * UPDATES + 1))  # one linear chain, each update on the one before


def test_update_retries_on_a_moved_head_and_gives_up_when_bounded(store: agentfs.Store) -> None:
    run = store.run("r")
    calls: list[object] = []

    def interfering(state: object) -> dict[str, int]:
        calls.append(state)
        if len(calls) == 1:  # another writer commits between this read and the commit
            run.commit({"n": 10})
        return {"n": (state or {"n": 0})["n"] + 1}  # type: ignore[index]

    assert run.update(interfering).state == {"n": 11}
    assert calls == [None, {"n": 10}]

    def always_interfering(state: object) -> dict[str, int]:
        run.commit({"n": 0})
        return {"n": 1}

    with pytest.raises(agentfs.Conflict, match=r"run 'r': update gave up after 2 retries"):
        run.update(always_interfering, retries=2)


def test_update_passes_artifacts_and_metadata(store: agentfs.Store) -> None:
    run = store.run("r")
    run.commit({"n": 1}, artifacts={"a.txt": b"A"})
    cp = run.update(lambda state: {"n": state["n"] + 1}, metadata={"by": "update"}, keep_artifacts=True)
    assert cp.metadata == {"by": "update"} and cp.artifacts["a.txt"].read_bytes() == b"A"


def test_keep_artifacts_carries_the_heads_artifacts_and_artifacts_override(store: agentfs.Store) -> None:
    run = store.run("r")
    big = bytes(range(256)) * 2048  # chunked into a tree
    first = run.commit({"step": 1}, artifacts={"small.txt": b"x" * 1000, "big.bin": big, "old.txt": b"old"})
    dropped = run.commit({"step": 2})
    assert dict(dropped.artifacts) == {}  # the default: a checkpoint holds what it was given
    run.commit({"step": 3}, artifacts=dict(first.artifacts))
    kept = run.commit({"step": 4}, artifacts={"old.txt": b"new"}, keep_artifacts=True)
    assert sorted(kept.artifacts) == ["big.bin", "old.txt", "small.txt"]
    assert kept.artifacts["old.txt"].read_bytes() == b"new"
    assert kept.artifacts["big.bin"].read_bytes() == big
    assert kept.artifacts["small.txt"].read_bytes() == b"x" * 1000
    assert store.verify().ok


def test_an_artifact_is_reused_without_copying_its_bytes(tmp_path: Path) -> None:
    with agentfs.open(tmp_path / ".agentfs") as store:
        big = bytes(range(256)) * 8192  # 2 MiB: loose chunk objects
        source = store.run("a").commit({}, artifacts={"big.bin": big, "small.txt": b"s" * 2000}).artifacts
        before = raw.object_ids(store)
        copy = store.run("b").commit({}, artifacts={"big.bin": source["big.bin"], "again.txt": source["small.txt"]})
        assert raw.object_ids(store) == before  # no object written: the refs point at the same blobs
        assert copy.artifacts["big.bin"].ref == source["big.bin"].ref  # a tree: no entry address to differ in
        assert copy.artifacts["big.bin"].read_bytes() == big
        assert copy.artifacts["again.txt"].read_bytes() == b"s" * 2000
        store.run("a").delete()  # run b borrows a's packed bytes: retention keeps what b needs
        assert store.run("b").latest().artifacts["again.txt"].read_bytes() == b"s" * 2000  # type: ignore[union-attr]
        store.gc(grace=0)
        assert store.verify().ok
    # from another store: copied, since the two stores share nothing
    with agentfs.open(tmp_path / "other") as other, agentfs.open(tmp_path / ".agentfs") as store:
        artifact = store.run("b").latest().artifacts["big.bin"]  # type: ignore[union-attr]
        assert other.run("c").commit({}, artifacts={"big.bin": artifact}).artifacts["big.bin"].read_bytes() == big


def test_a_str_source_is_a_path_and_the_error_says_so(store: agentfs.Store) -> None:
    with pytest.raises(agentfs.NotFound, match=r"a str source is a path; give bytes"):
        store.run("r").commit({}, artifacts={"notes.md": "# my notes"})


def test_a_reused_artifact_survives_pulling_one_run_and_deleting_its_source(tmp_path: Path) -> None:
    source, other = tmp_path / "a" / ".agentfs", tmp_path / "b" / ".agentfs"
    with agentfs.open(source) as store:
        report = store.run("drafts").commit({}, artifacts={"report.md": b"r" * 3000}).artifacts["report.md"]  # packed in its entry
        store.run("final").commit({"done": True}, artifacts={"report.md": report})
    url = (tmp_path / "remote").as_uri()
    for args in (["--store", str(source), "sync", url], ["--store", str(other), "pull", url, "final"]):
        assert subprocess.run([sys.executable, "-m", "agentfs.cli.main", *args], capture_output=True, timeout=60).returncode == 0
    with agentfs.open(other) as store:
        store.run("drafts").delete()  # the pulled store knows that final borrows from drafts
        store.gc(grace=0)
        assert store.run("final").latest().artifacts["report.md"].read_bytes() == b"r" * 3000  # type: ignore[union-attr]
        assert store.verify().ok
