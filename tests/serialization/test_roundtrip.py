"""Every supported type, nested, survives commit and load exactly; nothing else is stored.

Values are compared type-exactly (`assert_same`), because 1 == 1.0 == True and Decimal("1.0") == Decimal("1")
in Python. Loads always go through a freshly opened store, so nothing is served from the writer's memory.
"""

from __future__ import annotations

import collections
import dataclasses
import datetime as dt
import decimal
import io
import math
import os
import re
import struct
import sys
import uuid
import zoneinfo
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgpack
import numpy as np
import pydantic
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import agentfs
from agentfs.serialization import converters, copy_value, decode_value
from tests.helpers.tree import snapshot

# --- registered user types -------------------------------------------------------------------------


@agentfs.register
@dataclasses.dataclass
class Point:
    x: Any
    y: Any


@agentfs.register
@dataclasses.dataclass(frozen=True)
class FrozenPoint:
    x: Any
    y: Any


@agentfs.register
class Box(pydantic.BaseModel):
    label: str
    payload: Any = None


@agentfs.register
class Message(pydantic.BaseModel):
    role: str
    n: int
    tags: list[str]


# --- type-exact comparison ---------------------------------------------------------------------------


def _same_tz(a: dt.tzinfo | None, b: dt.tzinfo | None, path: str) -> None:
    assert type(a) is type(b), f"{path}: tzinfo {a!r} came back as {b!r}"
    if isinstance(a, zoneinfo.ZoneInfo):
        assert isinstance(b, zoneinfo.ZoneInfo)
        assert a.key == b.key, f"{path}: zone {a.key} came back as {b.key}"
    elif isinstance(a, dt.timezone):
        assert a.utcoffset(None) == b.utcoffset(None), f"{path}: offset {a} came back as {b}"
        assert a.tzname(None) == b.tzname(None), f"{path}: tz name {a.tzname(None)!r} came back as {b.tzname(None)!r}"


def assert_same(a: Any, b: Any, path: str = "state") -> None:
    """a and b are equal, with the same types all the way down (and the same float bits)."""
    assert type(a) is type(b), f"{path}: {type(a).__name__} {a!r} came back as {type(b).__name__} {b!r}"
    if isinstance(a, np.ndarray):
        assert a.dtype.str == b.dtype.str and a.shape == b.shape, f"{path}: {a.dtype.str}{a.shape} vs {b.dtype.str}{b.shape}"
        assert np.ascontiguousarray(a).tobytes() == np.ascontiguousarray(b).tobytes(), f"{path}: array data differs"
    elif isinstance(a, np.generic):
        assert a.dtype.str == b.dtype.str and a.tobytes() == b.tobytes(), f"{path}: {a!r} vs {b!r}"
    elif isinstance(a, float):
        assert struct.pack("<d", a) == struct.pack("<d", b), f"{path}: {a!r} vs {b!r}"
    elif isinstance(a, decimal.Decimal):
        assert a.as_tuple() == b.as_tuple(), f"{path}: {a!r} vs {b!r}"
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), f"{path}: length {len(a)} vs {len(b)}"
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            assert_same(x, y, f"{path}[{i}]")
    elif isinstance(a, dict):
        assert len(a) == len(b), f"{path}: {len(a)} keys vs {len(b)}"
        for (ka, va), (kb, vb) in zip(a.items(), b.items(), strict=True):
            assert_same(ka, kb, f"{path} key {ka!r}")
            assert_same(va, vb, f"{path}[{ka!r}]")
    elif isinstance(a, (set, frozenset)):
        assert len(a) == len(b), f"{path}: {len(a)} items vs {len(b)}"
        for x in a:
            matches = [y for y in b if y == x]
            assert len(matches) == 1, f"{path}: {x!r} not found in {b!r}"
            assert_same(x, matches[0], f"{path} item {x!r}")
    elif isinstance(a, dt.datetime):
        fields = ("year", "month", "day", "hour", "minute", "second", "microsecond", "fold")
        assert [getattr(a, f) for f in fields] == [getattr(b, f) for f in fields], f"{path}: {a!r} vs {b!r}"
        _same_tz(a.tzinfo, b.tzinfo, path)
        assert a.utcoffset() == b.utcoffset(), f"{path}: {a!r} vs {b!r}"
    elif isinstance(a, dt.time):
        fields = ("hour", "minute", "second", "microsecond", "fold")
        assert [getattr(a, f) for f in fields] == [getattr(b, f) for f in fields], f"{path}: {a!r} vs {b!r}"
        _same_tz(a.tzinfo, b.tzinfo, path)
    elif dataclasses.is_dataclass(a):
        for field in dataclasses.fields(a):
            assert_same(getattr(a, field.name), getattr(b, field.name), f"{path}.{field.name}")
    elif isinstance(a, pydantic.BaseModel):
        for name in type(a).model_fields:
            assert_same(getattr(a, name), getattr(b, name), f"{path}.{name}")
    else:
        assert a == b, f"{path}: {a!r} vs {b!r}"


def test_assert_same_is_strict() -> None:
    """The comparison itself tells apart values Python calls equal."""
    for a, b in [
        (1, 1.0),
        (1, True),
        (0.0, -0.0),
        ((1,), [1]),
        ({1}, frozenset({1})),
        (decimal.Decimal("1.0"), decimal.Decimal("1")),
        (b"a", bytearray(b"a")),
        ({"a": 1, "b": 2}, {"b": 2, "a": 1}),
        (dt.datetime(2020, 1, 1), dt.datetime(2020, 1, 1, fold=1)),
        (dt.datetime(2020, 1, 1, 1, tzinfo=dt.timezone(dt.timedelta(hours=1))), dt.datetime(2020, 1, 1, tzinfo=dt.timezone.utc)),
        (np.array(1.0), np.array([1.0])),
        (np.arange(3, dtype="<i4"), np.arange(3, dtype=">i4")),
        (np.float32(1), np.float64(1)),
        (Point(1, 2), Point(1, 2.0)),
        ({1, 2}, {1, 2.0}),
    ]:
        with pytest.raises(AssertionError):
            assert_same(a, b)


# --- strategies ---------------------------------------------------------------------------------------

ZONES = ["Europe/Paris", "America/New_York", "Asia/Kolkata", "Australia/Lord_Howe", "UTC"]
fixed_offsets = st.timedeltas(min_value=-dt.timedelta(hours=23, minutes=59), max_value=dt.timedelta(hours=23, minutes=59)).map(dt.timezone)
zones = st.sampled_from(ZONES).map(zoneinfo.ZoneInfo)
timezones = st.none() | fixed_offsets | zones
datetimes = st.builds(
    lambda d, tz, fold: d.replace(tzinfo=tz, fold=fold),
    st.datetimes(min_value=dt.datetime(1, 1, 2), max_value=dt.datetime(9999, 12, 30)),
    timezones,
    st.integers(0, 1),
)
times = st.builds(lambda t, tz, fold: t.replace(tzinfo=tz, fold=fold), st.times(), timezones, st.integers(0, 1))
decimals = st.decimals(allow_nan=False, allow_infinity=False)

hashable_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**63), max_value=2**64 - 1),
    st.floats(allow_nan=False),
    st.text(),
    st.binary(),
    datetimes,
    st.dates(),
    times,
    st.timedeltas(),
    st.uuids(),
    decimals,
)
scalars = st.one_of(hashable_scalars, st.binary().map(bytearray))  # bytearray: unhashable

NUMPY_DTYPES = ["?", "i1", "<u2", "<i4", ">i4", "<i8", "<u8", "<f2", "<f4", "<f8", ">f8", "<c16", "<U3", "S4", "<M8[ms]", "<m8[s]"]
numpy_arrays = hnp.arrays(
    dtype=st.sampled_from(NUMPY_DTYPES).map(np.dtype),
    shape=hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4),
)
numpy_values = st.one_of(
    numpy_arrays,
    numpy_arrays.filter(lambda a: a.ndim >= 1).map(lambda a: a[::-1]),  # non-contiguous
    numpy_arrays.filter(lambda a: a.ndim >= 2).map(lambda a: a.T),  # Fortran order
    hnp.arrays(dtype=st.sampled_from(NUMPY_DTYPES).map(np.dtype), shape=()).map(lambda a: a[()]),  # numpy scalars
)

hashables = st.recursive(
    hashable_scalars,
    lambda inner: st.tuples(inner, inner) | st.frozensets(inner, max_size=3) | st.builds(FrozenPoint, inner, inner),
    max_leaves=6,
)


def _containers(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        st.lists(children, max_size=4),
        st.lists(children, max_size=4).map(tuple),
        st.dictionaries(st.text(max_size=8), children, max_size=4),
        st.dictionaries(st.integers(-(2**63), 2**64 - 1), children, max_size=4),
        st.sets(hashables, max_size=4),
        st.frozensets(hashables, max_size=4),
        st.builds(Point, children, children),
        st.builds(FrozenPoint, children, children),
        st.builds(Box, label=st.text(max_size=5), payload=children),
        st.builds(
            Message,
            role=st.sampled_from(["user", "assistant"]),
            n=st.integers(-(2**63), 2**63 - 1),
            tags=st.lists(st.text(max_size=5), max_size=3),
        ),
    )


values = st.recursive(st.one_of(scalars, numpy_values), _containers, max_leaves=20)

# a random, incompressible blob: forces a value onto the chunked (tree) path
PADDING = os.urandom(40_000)


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("roundtrip") / ".agentfs"
    agentfs.open(path).close()
    return path


def reload(root: Path, cp: agentfs.Checkpoint) -> Any:
    with agentfs.open(root) as fresh:
        return fresh.run(cp.run).get(cp.id).state


# report_multiple_bugs=False: shrink one failure, not each distinct one (keeps a failing run short)
SETTINGS = settings(
    max_examples=100,
    deadline=None,
    report_multiple_bugs=False,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@SETTINGS
@given(state=st.dictionaries(st.text(max_size=10), values, max_size=5), pad=st.booleans())
def test_dict_state_round_trips(root: Path, state: dict[str, Any], pad: bool) -> None:
    if pad:
        state = {**state, "\x00pad": [PADDING, state]}  # a large key holding a nested copy: chunked
    with agentfs.open(root, durability="process") as store:
        cp = store.run("rt/dict").commit(state)
    assert_same(state, reload(root, cp))


@SETTINGS
@given(value=values, container=st.sampled_from([list, tuple]), pad=st.booleans())
def test_non_dict_state_round_trips(root: Path, value: Any, container: type, pad: bool) -> None:
    state = container([value, PADDING] if pad else [value])
    with agentfs.open(root, durability="process") as store:
        cp = store.run("rt/value").commit(state)
    assert_same(state, reload(root, cp))


@settings(max_examples=60, deadline=None, report_multiple_bugs=False)
@given(value=values)
def test_any_value_round_trips_as_whole_state(root: Path, value: Any) -> None:
    with agentfs.open(root, durability="process") as store:
        cp = store.run("rt/whole").commit(value)
    assert_same(value, reload(root, cp))


def _examples() -> dict[str, Any]:
    paris = zoneinfo.ZoneInfo("Europe/Paris")
    return {
        "none": None,
        "bools": [True, False],
        "ints": [0, 1, -1, 2**63 - 1, -(2**63), 2**64 - 1, 2**32, -(2**31)],
        "floats": [0.0, -0.0, 1.5, math.inf, -math.inf, 5e-324, sys.float_info.max],
        "str": "héllo \u2603 \U0001f600",
        "bytes": b"\x00\xff" * 40,
        "tuple": (1, (2, (3,)), []),
        "empty": [[], (), {}, set(), frozenset(), "", b""],
        "int_keys": {1: "a", -(2**63): "b", 2**64 - 1: "c"},
        "set": {1, "a", (1, 2), frozenset({3})},
        "frozenset": frozenset({b"x", None, 2.5}),
        "naive": dt.datetime(2024, 2, 29, 23, 59, 59, 999999),
        "fixed": dt.datetime(2024, 1, 1, 12, tzinfo=dt.timezone(dt.timedelta(hours=-3, minutes=-30))),
        "utc": dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc),
        "paris_fold0": dt.datetime(2021, 10, 31, 2, 30, tzinfo=paris),
        "paris_fold1": dt.datetime(2021, 10, 31, 2, 30, tzinfo=paris, fold=1),
        "date": dt.date(1, 1, 1),
        "time": dt.time(23, 59, 59, 1, tzinfo=dt.timezone(dt.timedelta(seconds=1)), fold=1),
        "time_zone": dt.time(1, tzinfo=paris),
        "timedelta": [dt.timedelta(days=-1, microseconds=1), dt.timedelta.max, dt.timedelta.min],
        "uuid": uuid.UUID("12345678-1234-5678-1234-567812345678"),
        "decimal": [
            decimal.Decimal("1.10"),
            decimal.Decimal("-0"),
            decimal.Decimal("1E+300"),
            decimal.Decimal("3.14159265358979323846264338327950288"),
        ],
        "arrays": [
            np.arange(12, dtype="<i8").reshape(3, 4),
            np.zeros((0, 3), dtype="<f4"),
            np.array(2.5),
            np.array(["ab", "c"]),
            np.array([1 + 2j]),
            np.arange(10)[::3],
            np.asfortranarray(np.arange(6).reshape(2, 3)),
        ],
        "np_scalars": [np.float32(1.5), np.int8(-3), np.uint64(2**64 - 1), np.bool_(True), np.str_("é"), np.datetime64("2020-01-01")],
        "np_empty_str": [np.str_(""), np.bytes_(b"")],
        "dataclass": Point(1, [Point(2.0, (3,))]),
        "frozen": FrozenPoint(frozenset({1}), None),
        "pydantic": [Box(label="b", payload={"t": (1, 2)}), Message(role="user", n=3, tags=["a"])],
    }


@pytest.mark.parametrize("name", sorted(_examples()))
def test_each_supported_type_round_trips(root: Path, name: str) -> None:
    """One named example per type: a failure here says which type broke, without shrinking."""
    value = _examples()[name]
    with agentfs.open(root) as store:  # default (fsync) durability
        cp = store.run("rt/examples").commit({name: value, "pad": [value, PADDING]})
        assert_same(value, reload(root, cp)[name])
        assert_same([value, PADDING], reload(root, cp)["pad"])
        cp = store.run("rt/examples").commit(value)
        assert_same(value, reload(root, cp))


def _objects(value: Any) -> Iterator[Any]:
    """Every mutable object `value` holds, itself included."""
    if isinstance(value, (list, dict, set, bytearray, np.ndarray, pydantic.BaseModel)) or dataclasses.is_dataclass(value):
        yield value
    children = value.values() if isinstance(value, dict) else value if isinstance(value, (list, tuple, set, frozenset)) else ()
    if dataclasses.is_dataclass(value):
        children = [getattr(value, field.name) for field in dataclasses.fields(value)]
    for child in children:
        yield from _objects(child)


@pytest.mark.parametrize("name", sorted(_examples()))
def test_copy_value_gives_what_a_load_gives_sharing_nothing(name: str) -> None:
    """copy_value (AgentFSSession's copy of the items it keeps) is the value as loaded back, with no object of the original."""
    value = {name: _examples()[name], "list": [bytearray(b"ab"), {"k": [1]}]}
    copied = copy_value(value, "value")
    assert_same(value, copied)
    held = {id(obj) for obj in _objects(value)}
    assert not [obj for obj in _objects(copied) if id(obj) in held], "the copy shares an object with the original"


def test_zero_dim_array_keeps_its_shape(root: Path) -> None:
    with agentfs.open(root) as store:
        cp = store.run("rt/zero-dim").commit({"a": np.array(7, dtype="<i4")})
    loaded = reload(root, cp)["a"]
    assert loaded.shape == () and loaded.dtype.str == "<i4" and int(loaded) == 7


def test_named_fixed_offset_keeps_its_name(root: Path) -> None:
    tz = dt.timezone(dt.timedelta(hours=1), "CET")
    value = dt.datetime(2024, 1, 1, tzinfo=tz)
    with agentfs.open(root) as store:
        cp = store.run("rt/tzname").commit({"t": value})
    assert reload(root, cp)["t"].tzname() == "CET"


def test_large_nested_state_round_trips(root: Path) -> None:
    """Mapping and list values far over the pack limit take the chunked path, then come back exactly."""
    messages = [
        {"role": "user", "id": i, "ts": dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc), "tags": ("a", i), "text": "w" * (i % 300)}
        for i in range(3000)
    ]
    state = {"messages": messages, "index": {i: uuid.UUID(int=i) for i in range(2000)}, "arr": np.arange(300_000, dtype="<f8")}
    with agentfs.open(root) as store:
        run = store.run("rt/large")
        cp = run.commit(state)
        messages.append({"role": "assistant", "id": -1, "ts": None, "tags": (), "text": ""})
        cp2 = run.commit(state)
    assert_same(messages[:-1], reload(root, cp)["messages"])
    assert_same(state, reload(root, cp2))


# --- refused values ------------------------------------------------------------------------------------


class Unregistered:
    pass


@dataclasses.dataclass
class UnregisteredData:
    x: int = 1


class UnregisteredModel(pydantic.BaseModel):
    x: int = 1


def _bad_cases() -> list[tuple[str, Any, str]]:
    obj = object()
    return [
        ("nested", {"messages": [{"ts": 1}, {}, {}, {"ts": obj}]}, 'state["messages"][3]["ts"]'),
        ("lambda", {"f": [1, lambda: None]}, 'state["f"][1]'),
        ("object", {"a": obj}, 'state["a"]'),
        ("instance", {"a": {"b": Unregistered()}}, 'state["a"]["b"]'),
        ("dataclass", {"a": [UnregisteredData()]}, 'state["a"][0]'),
        ("pydantic", {"a": (1, UnregisteredModel())}, 'state["a"][1]'),
        ("object_array", {"a": np.array([1, "x"], dtype=object)}, 'state["a"]'),
        ("structured_array", {"a": [np.zeros(2, dtype=[("x", "<i4")])]}, 'state["a"][0]'),
        ("ordereddict", {"a": collections.OrderedDict(x=1)}, 'state["a"]'),
        ("defaultdict", {"a": [collections.defaultdict(list)]}, 'state["a"][0]'),
        ("top_ordereddict", collections.OrderedDict(x=1), "state"),
        ("top_defaultdict", collections.defaultdict(int, x=1), "state"),
        ("big_int", {"a": [1, 2, 2**64]}, 'state["a"][2]'),
        ("small_int", {"a": [-(2**63) - 1]}, 'state["a"][0]'),
        ("complex", {"a": 1j}, 'state["a"]'),
        ("str_subclass", {"a": type("S", (str,), {})("x")}, 'state["a"]'),
        ("in_list_state", [0, [1, obj]], "state[1][1]"),
        ("in_tuple_state", (0, {"k": obj}), 'state[1]["k"]'),
        ("int_keyed_state", {1: [obj]}, "state[1][0]"),
        ("in_dataclass", {"p": Point(1, obj)}, 'state["p"].y'),
        ("in_pydantic", {"b": Box(label="x", payload=[obj])}, 'state["b"].payload[0]'),
        ("quoted_key", {'we"ird': {"k": obj}}, 'state["we\\"ird"]["k"]'),
        ("surrogate", {"a": ["ok", "\ud800"]}, 'state["a"][1]'),
    ]


def names_path(message: str, path: str) -> bool:
    """`path` occurs in `message` as a whole path, not as the prefix of a longer one."""
    return re.search(re.escape(path) + r"(?![\[.\w])", message) is not None


@pytest.fixture
def populated(tmp_path: Path) -> Iterator[agentfs.Store]:
    """A store with a run holding large, chunked and packed values, so refusals could reuse them."""
    with agentfs.open(tmp_path / ".agentfs") as store:
        store.run("r").commit({"big": PADDING, "mid": "m" * 1000, "small": 1}, artifacts={"a.bin": PADDING * 3})
        yield store


@pytest.mark.parametrize(("case", "state", "path"), _bad_cases(), ids=[c[0] for c in _bad_cases()])
def test_unsupported_value_is_refused_with_its_path(populated: agentfs.Store, case: str, state: Any, path: str) -> None:
    before = snapshot(populated.root)
    run = populated.run("r")
    head = run.latest()
    # a large valid key first: encoding must finish before any object is written
    full = {"big2": os.urandom(50_000), **state} if type(state) is dict and all(type(k) is str for k in state) else state
    with pytest.raises(agentfs.SerializationError) as info:
        run.commit(full, artifacts={"x.bin": os.urandom(100_000)})
    assert isinstance(info.value, TypeError) and isinstance(info.value, agentfs.AgentFSError)
    assert names_path(str(info.value), path), f"{str(info.value)!r} does not name {path}"
    assert snapshot(populated.root) == before
    assert run.latest().id == head.id


def test_unsupported_metadata_is_refused_with_its_path(populated: agentfs.Store) -> None:
    before = snapshot(populated.root)
    with pytest.raises(agentfs.SerializationError) as info:
        populated.run("r").commit({"ok": 1}, metadata={"source": [object()]})
    assert names_path(str(info.value), 'metadata["source"][0]'), str(info.value)
    assert snapshot(populated.root) == before


@pytest.mark.parametrize(("case", "state", "path"), _bad_cases(), ids=[c[0] for c in _bad_cases()])
def test_copy_value_refuses_what_a_commit_refuses_with_its_path(case: str, state: Any, path: str) -> None:
    with pytest.raises(agentfs.SerializationError) as info:
        copy_value(state, "state")
    assert names_path(str(info.value), path), f"{str(info.value)!r} does not name {path}"


@pytest.mark.parametrize("bad", ["../escape.txt", "/abs.txt", "a\\b", "", "a//b", "nul\x00.txt", "sp ace", ".", 7])
def test_bad_artifact_name_writes_nothing(populated: agentfs.Store, tmp_path: Path, bad: Any) -> None:
    outside = snapshot(tmp_path)
    with pytest.raises(agentfs.InvalidName):
        populated.run("r").commit({"big": os.urandom(50_000)}, artifacts={"good.bin": os.urandom(100_000), bad: b"x" * 100})
    assert snapshot(tmp_path) == outside


def test_missing_artifact_path_writes_nothing(populated: agentfs.Store, tmp_path: Path) -> None:
    before = snapshot(tmp_path)
    for missing in (tmp_path / "nope.bin", str(tmp_path / "nope.bin"), tmp_path):  # a directory is not a file either
        with pytest.raises(agentfs.NotFound) as info:
            populated.run("r").commit({"big": os.urandom(50_000)}, artifacts={"good.bin": os.urandom(100_000), "data.csv": missing})
        assert isinstance(info.value, agentfs.AgentFSError)
        assert "data.csv" in str(info.value)
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("source", [42, 1.5, ["a"], None], ids=repr)
def test_unsupported_artifact_source_writes_nothing(populated: agentfs.Store, source: Any) -> None:
    before = snapshot(populated.root)
    with pytest.raises(agentfs.SerializationError):
        populated.run("r").commit({"big": os.urandom(50_000)}, artifacts={"a.txt": source})
    assert snapshot(populated.root) == before


def test_text_stream_artifact_is_refused_and_writes_nothing(populated: agentfs.Store) -> None:
    """A text-mode file yields str, not bytes: a clear agentfs error, before the state's objects are written."""
    before = snapshot(populated.root)
    with pytest.raises(agentfs.AgentFSError):
        populated.run("r").commit({"big": os.urandom(50_000)}, artifacts={"notes.txt": io.StringIO("hello")})
    assert snapshot(populated.root) == before


# --- loading never imports -----------------------------------------------------------------------------


@pytest.fixture
def registry() -> Iterator[None]:
    """Restore the converter registry after a test that unregisters classes."""
    by_name, by_class = dict(converters._by_name), dict(converters._by_class)
    yield
    converters._by_name.clear()
    converters._by_name.update(by_name)
    converters._by_class.clear()
    converters._by_class.update(by_class)


def _unregister(cls: type) -> str:
    entry = converters._by_class.pop(cls)
    del converters._by_name[entry.name]
    return entry.name


def test_unregistered_class_on_load_is_a_clear_error(tmp_path: Path, registry: None) -> None:
    @dataclasses.dataclass
    class Later:
        v: int

    agentfs.register(Later, name="tests.Later")
    with agentfs.open(tmp_path / "s") as store:
        cp = store.run("r").commit({"ok": [1, 2], "later": [Later(1)]})
    _unregister(Later)
    with agentfs.open(tmp_path / "s") as fresh:
        checkpoint = fresh.run("r").get(cp.id)
        with pytest.raises(agentfs.AgentFSError) as info:
            checkpoint.state  # noqa: B018
    assert "tests.Later" in str(info.value) and "register" in str(info.value)
    assert not isinstance(info.value, (ImportError, AttributeError))


def test_value_naming_a_module_is_never_imported(tmp_path: Path, registry: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """A stored name like "os.system" or "probe_module.Evil" is looked up in the registry only."""
    probe = tmp_path / "modules"
    probe.mkdir()
    (probe / "agentfs_probe_module.py").write_text("raise SystemExit('agentfs imported a module named in data')\n")
    monkeypatch.syspath_prepend(str(probe))
    calls: list[Any] = []
    monkeypatch.setattr(os, "system", lambda *a: calls.append(a))

    @dataclasses.dataclass
    class Evil:
        cmd: str

    @dataclasses.dataclass
    class Evil2:
        cmd: str

    agentfs.register(Evil, name="os.system")
    agentfs.register(Evil2, name="agentfs_probe_module.Evil")
    with agentfs.open(tmp_path / "s") as store:
        cp1 = store.run("r").commit({"x": Evil("echo pwned")})
        cp2 = store.run("r").commit([Evil2("x")])
    _unregister(Evil)
    _unregister(Evil2)
    with agentfs.open(tmp_path / "s") as fresh:
        for cp, name in ((cp1, "os.system"), (cp2, "agentfs_probe_module.Evil")):
            with pytest.raises(agentfs.FormatError) as info:
                fresh.run("r").get(cp.id).state  # noqa: B018
            assert name in str(info.value)
    assert calls == []
    assert "agentfs_probe_module" not in sys.modules


def _ext(code: int, payload: bytes) -> bytes:
    return msgpack.packb(msgpack.ExtType(code, payload))


@pytest.mark.parametrize(
    "record",
    [
        _ext(converters.NDARRAY, msgpack.packb(["|O", [1], b"\0" * 8])),
        _ext(converters.NDARRAY, msgpack.packb([[["a", "|O"]], [1], b"\0" * 8])),
        _ext(converters.NPSCALAR, msgpack.packb(["|O", b"\0" * 8])),
        _ext(converters.REGISTERED, msgpack.packb(["os.system", ["echo pwned"]])),
        _ext(converters.REGISTERED, msgpack.packb(["builtins.eval", "1"])),
        _ext(99, b""),
        _ext(converters.DECIMAL, b"not a number"),
        _ext(converters.DATETIME, msgpack.packb([2020, 1, 1, 0, 0, 0, 0, 0, ["zone", "No/Such_Zone"]])),
        _ext(converters.DATETIME, msgpack.packb([2020, 1, 1, 0, 0, 0, 0, 0, ["zone", "../../../etc/passwd"]])),
        _ext(converters.DATETIME, msgpack.packb([2020, 13, 1, 0, 0, 0, 0, 0, None])),
        _ext(converters.REGISTERED, msgpack.packb([f"{Point.__module__}.{Point.__qualname__}", [1, 2]])),
        _ext(converters.REGISTERED, msgpack.packb([f"{Point.__module__}.{Point.__qualname__}", {"nope": 1}])),
        _ext(converters.SET, msgpack.packb(2) + msgpack.packb(1)),
        _ext(converters.TUPLE, b"\xc1"),
    ],
    ids=[
        "object_array",
        "object_field_array",
        "object_scalar",
        "os_system",
        "eval",
        "unknown_code",
        "bad_decimal",
        "unknown_zone",
        "zone_path",
        "bad_date",
        "dataclass_fields_not_a_map",
        "dataclass_unknown_field",
        "set_count",
        "bad_tuple",
    ],
)
def test_crafted_records_fail_cleanly(record: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    """Untrusted bytes (say, from a remote) decode only through registered converters, or fail with FormatError."""
    calls: list[Any] = []
    monkeypatch.setattr(os, "system", lambda *a: calls.append(a))
    with pytest.raises(agentfs.FormatError) as info:
        decode_value(record, "state['x']")
    assert "state['x']" in str(info.value)
    assert calls == []


def test_bytearray_round_trips_and_memoryview_loads_as_bytes(store: agentfs.Store) -> None:
    """msgpack packs both as bin before any converter sees them; a bytearray is tagged (ext 14), see docs/FORMAT.md."""
    state = {"ba": bytearray(b"abc"), "mv": memoryview(b"xyz"), "deep": [1, {"k": bytearray(b"")}, (bytearray(b"t"),)]}
    cp = store.run("r").commit(state)
    loaded = store.run("r").get(cp.id).state
    assert_same(loaded, {"ba": bytearray(b"abc"), "mv": b"xyz", "deep": [1, {"k": bytearray(b"")}, (bytearray(b"t"),)]})
    assert type(store.run("r").commit(bytearray(b"whole")).state) is bytearray


def test_a_bytearray_stored_before_ext_14_still_loads_as_bytes() -> None:
    assert_same(decode_value(msgpack.packb({"ba": bytearray(b"abc")}, use_bin_type=True), "state"), {"ba": b"abc"})


def test_a_raw_msgpack_ext_fails_clearly_at_load(store: agentfs.Store) -> None:
    """msgpack packs ExtType itself, so commit cannot see it; loading refuses the unknown code by name."""
    cp = store.run("r").commit({"a": [msgpack.ExtType(99, b"x")]})
    with pytest.raises(agentfs.FormatError, match="unknown ext type 99"):
        _ = store.run("r").get(cp.id).state
