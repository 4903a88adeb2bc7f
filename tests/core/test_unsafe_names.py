"""Run and artifact names that could escape the store, or are not portable, are refused before any write."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import agentfs
from agentfs.names import check_name
from tests.helpers import raw
from tests.helpers.tree import snapshot

DEPTH = 8  # the store sits this deep inside tmp_path, so a relative escape still lands where we look


@pytest.fixture
def nest(tmp_path: Path) -> Path:
    return tmp_path.joinpath(*(f"d{i}" for i in range(DEPTH)))


@pytest.fixture
def store(nest: Path) -> Iterator[agentfs.Store]:
    with agentfs.open(nest / ".agentfs", durability="process") as opened:  # names do not depend on fsync
        opened.run("base").commit({"x": 1, "blob": os.urandom(30_000)}, artifacts={"a.txt": b"a" * 200})
        yield opened


def bad_names(tmp_path: Path) -> list[Any]:
    up = "../" * (DEPTH + 3)
    return [
        "..",
        ".",
        "../escaped",
        f"{up}escaped",
        "a/../../escaped",
        "a/./b",
        "./a",
        "a/.",
        "a/..",
        f"{tmp_path}/escaped",  # absolute, pointing at a place this test watches
        "/etc/agentfs-escaped",
        "/",
        "a\\b",
        "..\\..\\escaped",
        "\\",
        "a\x00b",
        "\x00",
        "a//b",
        "a/",
        "/a",
        "//",
        "",
        "x" * 129,
        "a/" + "y" * 129,
        "/".join(["s" * 100] * 11),  # every segment fine, the name over 1024
        "a b",
        " ",
        "a\tb",
        "a\nb",
        "a\n",
        "é",
        "名前",
        "run/\u2024\u2024",  # ONE DOT LEADER twice: looks like ..
        "a:b",
        "~",
        "$HOME",
        "a*b",
        "a?",
        "%2e%2e",
        1,
        None,
        b"abc",
        Path("a"),
        ["a"],
        ("a",),
    ]


def _ids(names: list[Any]) -> list[str]:
    return [repr(n)[:40] for n in names]


BAD = bad_names(Path("/tmp/placeholder"))


@pytest.mark.parametrize("index", range(len(BAD)), ids=_ids(BAD))
def test_bad_run_name_is_refused_before_any_write(store: agentfs.Store, tmp_path: Path, index: int) -> None:
    bad = bad_names(tmp_path)[index]
    before = snapshot(tmp_path)
    with pytest.raises(agentfs.InvalidName) as info:
        store.run(bad).commit({"x": os.urandom(30_000)}, artifacts={"a.bin": os.urandom(100_000)})
    assert isinstance(info.value, ValueError) and isinstance(info.value, agentfs.AgentFSError)
    assert "run" in str(info.value)
    base = store.run("base")
    with pytest.raises(agentfs.InvalidName):
        base.fork(base.latest().id, bad)
    assert snapshot(tmp_path) == before
    assert store.runs() == ["base"]


HASHABLE = [i for i, name in enumerate(BAD) if not isinstance(name, list)]  # a list cannot be a mapping key


@pytest.mark.parametrize("index", HASHABLE, ids=_ids([BAD[i] for i in HASHABLE]))
def test_bad_artifact_name_is_refused_before_any_write(store: agentfs.Store, tmp_path: Path, index: int) -> None:
    bad = bad_names(tmp_path)[index]
    before = snapshot(tmp_path)
    with pytest.raises(agentfs.InvalidName) as info:
        store.run("base").commit({"x": os.urandom(30_000)}, artifacts={"ok.bin": os.urandom(100_000), bad: os.urandom(100_000)})
    assert "artifact" in str(info.value)
    assert snapshot(tmp_path) == before
    assert len(store.run("base").history()) == 1


BAD_IDS: list[Any] = [
    "",
    "../../../../escaped",
    "01ARZ3NDEKTSV4RRFFQ69G5FA",  # 25 chars
    "01ARZ3NDEKTSV4RRFFQ69G5FAVX",  # 27 chars
    "01arz3ndektsv4rrffq69g5fav",  # lower case
    "01ARZ3NDEKTSV4RRFFQ69G5FAU",  # U is not Crockford base32
    "01ARZ3NDEKTSV4RRFFQ69G5FA/",
    "../01ARZ3NDEKTSV4RRFFQ69G5F",
    "01ARZ3NDEKTSV4RRFFQ69G5F\x00V",
    None,
    12345,
    b"01ARZ3NDEKTSV4RRFFQ69G5FAV",
]


@pytest.mark.parametrize("bad", BAD_IDS, ids=_ids(BAD_IDS))
def test_bad_checkpoint_id_is_refused(store: agentfs.Store, tmp_path: Path, bad: Any) -> None:
    before = snapshot(tmp_path)
    run = store.run("base")
    with pytest.raises(agentfs.InvalidName):
        run.get(bad)
    with pytest.raises(agentfs.InvalidName):
        run.fork(bad, "copy")
    if bad is not None:  # parent=None means "the run must be empty"
        with pytest.raises(agentfs.InvalidName):
            run.commit({"x": 2}, parent=bad)
    assert snapshot(tmp_path) == before


def test_unknown_well_formed_id_is_not_found(store: agentfs.Store) -> None:
    with pytest.raises(agentfs.NotFound):
        store.run("base").get("01ARZ3NDEKTSV4RRFFQ69G5FAV")
    with pytest.raises(agentfs.NotFound):
        store.run("never-committed").get("01ARZ3NDEKTSV4RRFFQ69G5FAV")


GOOD = ["a", "research/task-42", "A.b_c-d", "...", ".hidden", "a-/_b/-c", "0", "x" * 128, "/".join(["s" * 127] * 8)]


@pytest.mark.parametrize("name", GOOD, ids=_ids(GOOD))
def test_good_names_stay_inside_the_store(store: agentfs.Store, tmp_path: Path, name: str) -> None:
    assert len(name) <= 1024
    outside = {k: v for k, v in snapshot(tmp_path).items() if not k.startswith(os.path.relpath(store.root, tmp_path))}
    cp = store.run(name).commit({"n": name}, artifacts={name: name.encode()})
    assert raw.record_ids(store, name) == [cp.id]
    after = {k: v for k, v in snapshot(tmp_path).items() if not k.startswith(os.path.relpath(store.root, tmp_path))}
    assert after == outside
    assert sorted(store.runs()) == sorted(["base", name])
    latest = store.run(name).latest()
    assert latest is not None and latest.state == {"n": name}
    assert latest.artifacts[name].read_bytes() == name.encode()


def test_longest_names_are_accepted(store: agentfs.Store) -> None:
    name = "/".join(["n" * 128] * 7 + ["m" * (1024 - 7 * 129)])
    assert len(name) == 1024
    store.run(name).commit({"ok": True}, artifacts={name: b"x"})
    assert store.run(name).latest().artifacts[name].read_bytes() == b"x"
    with pytest.raises(agentfs.InvalidName):
        store.run(name + "m")


def test_runs_whose_names_share_segments_stay_separate(store: agentfs.Store) -> None:
    """'a', 'a/b' and 'a/b/c' are three runs; nesting does not leak checkpoints between them."""
    names = ["a", "a/b", "a/b/c", "logs", "locks", "runs/x", "a/logs/b"]
    for i, name in enumerate(names):
        store.run(name).commit({"i": i})
    assert sorted(store.runs()) == sorted(["base", *names])
    for i, name in enumerate(names):
        history = store.run(name).history()
        assert [cp.state for cp in history] == [{"i": i}]


@pytest.mark.parametrize("name", ["log", "q/log", "q/log/7ZZZZZZZZZZZZZZZZZZZZZZZZZ", "log/x"])
def test_a_log_segment_is_reserved(store: agentfs.Store, name: str) -> None:
    """runs/q/log/ holds q's entries: a run 'q/log/<26 chars>' would put a directory there that q reads as a checkpoint."""
    before = snapshot(store.root)
    with pytest.raises(agentfs.InvalidName, match="'log' segment"):
        store.run(name)
    assert snapshot(store.root) == before


@pytest.mark.parametrize(("first", "second"), [("x", "x.lock/y"), ("x.lock/y", "x"), ("x.y/z", "x.y"), ("p.q", "p.r")])
def test_lock_files_of_different_runs_do_not_collide(store: agentfs.Store, first: str, second: str) -> None:
    """Each run's lock lives under locks/; one run's lock file must not block another run's commits."""
    store.run(first).commit({"n": 1})
    store.run(second).commit({"n": 2})
    store.run(first).commit({"n": 3})
    assert store.run(first).latest().state == {"n": 3}
    assert store.run(second).latest().state == {"n": 2}


segment_chars = st.characters(codec="utf-8", exclude_characters="/")


@settings(max_examples=300, deadline=None)
@given(
    name=st.text(segment_chars | st.just("/") | st.just(".") | st.just("\\"), max_size=40)
    | st.sampled_from(["log", "a/log", "log/b", "logs"])
)
def test_check_name_accepts_exactly_the_documented_grammar(name: str) -> None:
    segments = name.split("/")
    allowed = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-")
    expected = (
        0 < len(name) <= 1024
        and all(segments)
        and all(s not in (".", "..", "log") for s in segments)  # "log" is reserved in run names
        and all(len(s) <= 128 for s in segments)
        and all(set(s) <= allowed for s in segments)
    )
    if expected:
        assert check_name(name) == name
    else:
        with pytest.raises(agentfs.InvalidName):
            check_name(name)
