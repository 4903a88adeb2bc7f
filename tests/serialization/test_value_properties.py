"""Property tests over states: every value either round-trips exactly or is refused at commit with a
SerializationError (never another error, never accepted and then unreadable); and a sweep of nesting
depths, committed and forged, run in a child process, never kills it by a signal.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import agentfs
from agentfs.serialization.depth import MAX_DEPTH

# lone surrogates included (they are refused): st.text() leaves them out whatever its alphabet
TEXT = st.lists(st.characters() | st.sampled_from(["\ud800", "\udfff"]), max_size=8).map("".join)
SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**70), max_value=2**70)  # past 64 bits: refused
    | st.floats(allow_nan=False)
    | TEXT
    | st.binary(max_size=8)
    | st.datetimes(timezones=st.none() | st.just(dt.timezone.utc))
    | st.dates()
    | st.timedeltas()
    | st.uuids()
    | st.decimals(allow_nan=False)
)
HASHABLE = st.recursive(SCALARS, lambda inner: st.tuples(inner, inner) | st.frozensets(inner, max_size=3), max_leaves=6)
VALUES = st.recursive(
    SCALARS | HASHABLE,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(TEXT | HASHABLE, inner, max_size=4)
        | st.tuples(inner, inner)
        | st.sets(HASHABLE, max_size=3)
        | st.builds(bytearray, st.binary(max_size=4))
    ),
    max_leaves=20,
)


def nest(value: Any, shapes: list[str]) -> Any:
    for shape in shapes:
        value = {"k": value} if shape == "dict" else (value,) if shape == "tuple" else [value]
    return value


DEEP = st.builds(nest, VALUES, st.lists(st.sampled_from(["list", "tuple", "dict"]), min_size=MAX_DEPTH - 3, max_size=MAX_DEPTH + 3))


def same(a: Any, b: Any) -> bool:
    """Equal and of the same types all the way down (1 == 1.0 == True and set() == frozenset() for ==)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return math.copysign(1, a) == math.copysign(1, b) and a == b
    if isinstance(a, decimal.Decimal):
        return str(a) == str(b)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(k, j) for k, j in zip(a, b, strict=True)) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (set, frozenset)):
        return a == b  # items are hashable scalars, tuples and frozensets: == is exact enough for them
    if isinstance(a, (dt.datetime, dt.time)):
        return a == b and a.tzinfo == b.tzinfo and a.fold == b.fold
    return bool(a == b) or (isinstance(a, (uuid.UUID, bytes, bytearray)) and a == b)


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> agentfs.Store:
    return agentfs.open(tmp_path_factory.mktemp("properties") / "store", durability="process")


def round_trips_or_is_refused(store: agentfs.Store, state: Any) -> None:
    run = store.run("p")
    try:
        committed = run.commit(state)
    except agentfs.SerializationError:
        return
    read = agentfs.open(store.root).run("p").get(committed.id).state
    assert same(read, state), (state, read)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(value=VALUES | DEEP)
def test_a_value_round_trips_exactly_or_is_refused_at_commit(store: agentfs.Store, value: Any) -> None:
    round_trips_or_is_refused(store, {"v": value})


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(state=st.dictionaries(TEXT, VALUES, max_size=4) | VALUES)
def test_a_whole_state_round_trips_exactly_or_is_refused_at_commit(store: agentfs.Store, state: Any) -> None:
    round_trips_or_is_refused(store, state)


SWEEP = [0, 1, 2, 50, MAX_DEPTH - 1, MAX_DEPTH, MAX_DEPTH + 1, MAX_DEPTH + 2, 150, 200, 250, 300, 511, 512, 600, 1000, 2000]
FORGED = [MAX_DEPTH, MAX_DEPTH + 1, 150, 200, 250, 300]  # what a writer without the limits could store


@pytest.mark.parametrize(("mode", "depths"), [("sweep", SWEEP), ("forged-sweep", FORGED)])
def test_a_depth_sweep_never_dies_by_a_signal(tmp_path: Path, mode: str, depths: list[int]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "tests.helpers.deep_values", mode, str(tmp_path), *map(str, depths)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, f"died by signal {-done.returncode}" if done.returncode < 0 else done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert len(lines) == 5 * len(depths)
    for line in lines:
        _kind, depth, outcome = line.split(" ", 2)
        if int(depth) <= MAX_DEPTH:
            assert outcome == f"ok {depth} ok {depth}", line
        elif mode == "sweep":
            assert outcome.startswith("SerializationError: ") and outcome.endswith("no checkpoint"), line
        else:
            assert outcome.startswith(f"ok {depth} FormatError: deep@"), line
