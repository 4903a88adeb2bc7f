"""Refusals a new user hits at commit say what is wrong and what to do, quickly and in one short line."""

from __future__ import annotations

import enum
import time
from typing import Any

import numpy as np
import pytest

import agentfs


class Color(enum.Enum):
    RED = 1


def refusal(store: agentfs.Store, state: Any) -> str:
    with pytest.raises(agentfs.SerializationError) as info:
        store.run("r").commit(state)
    assert store.run("r").latest() is None  # nothing committed
    return str(info.value)


@pytest.mark.parametrize("number", [2**70, 2**64, -(2**63) - 1])
def test_an_int_out_of_range_names_the_range(store: agentfs.Store, number: int) -> None:
    message = refusal(store, {"n": [number]})
    assert message.startswith('state["n"][0] is an int of ')
    assert "outside the range agentfs stores (-2**63 to 2**64-1); store it as a str or a decimal.Decimal" in message
    assert "builtins.int" not in message


def test_ints_at_the_edges_of_the_range_are_stored(store: agentfs.Store) -> None:
    assert store.run("r").commit({"n": [2**64 - 1, -(2**63)]}).state == {"n": [2**64 - 1, -(2**63)]}


def test_an_unregistered_enum_points_at_register(store: agentfs.Store) -> None:
    message = refusal(store, {"color": Color.RED})
    assert message.startswith(f'state["color"] is a {__name__}.Color, which is not registered; register it with agentfs.register()')


def test_a_numpy_object_array_says_why(store: agentfs.Store) -> None:
    message = refusal(store, {"a": np.array([{"x": 1}], dtype=object)})
    assert message == (
        'state["a"] is a numpy.ndarray of dtype object, which agentfs cannot store without pickle; convert it to a list or a plain dtype'
    )


@pytest.mark.parametrize(
    ("build", "expected"),
    [
        ("dict", 'state["x"][0]["self"] is state["x"][0] again'),
        ("tuple", 'state["t"][0][0] is state["t"] again'),
    ],
)
def test_a_cycle_is_named_quickly_and_briefly(store: agentfs.Store, build: str, expected: str) -> None:
    if build == "dict":
        looped: dict[str, Any] = {}
        looped["self"] = looped
        state: dict[str, Any] = {"x": [looped]}
    else:
        inner: list[Any] = []
        holder = (inner,)
        inner.append(holder)  # a cycle through a tuple: msgpack recurses through _pack, not its own nesting
        state = {"t": holder}
    started = time.perf_counter()
    message = refusal(store, state)
    assert time.perf_counter() - started < 1.0
    assert message == f"{expected}: a value that contains itself cannot be stored"


def test_a_shared_value_is_not_a_cycle(store: agentfs.Store) -> None:
    shared = [1, 2]
    assert store.run("r").commit({"a": [shared, shared], "b": shared}).state == {"a": [[1, 2], [1, 2]], "b": [1, 2]}
