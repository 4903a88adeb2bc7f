"""The two walks of depth.py give one answer: the recursive one (values of at most SMALL_VALUE encoded bytes) and the
one by levels (larger values), for any nesting of lists, tuples, dicts (keys too), sets and registered classes, at
every limit around the value's depth; and the recursive one never fails for a caller deep in its own stack."""

from __future__ import annotations

import dataclasses
import sys
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

import agentfs
from agentfs.serialization import depth


@dataclasses.dataclass(frozen=True)
class Pair:
    left: Any
    right: Any


agentfs.register(Pair, name="tests.depth.Pair")

LEAVES = st.none() | st.integers() | st.text(max_size=3)
KEYS = st.recursive(LEAVES, lambda inner: st.tuples(inner, inner) | st.frozensets(inner, max_size=2), max_leaves=4)
VALUES = st.recursive(
    LEAVES,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.tuples(inner, inner)
        | st.dictionaries(KEYS, inner, max_size=3)
        | st.sets(KEYS, max_size=2)
        | st.builds(Pair, inner, inner)
    ),
    max_leaves=25,
)


def levels(value: Any) -> int:
    """The value's depth, by the walk by levels: the least limit it is not too deep for."""
    limit = 0
    while depth.too_deep(value, limit):
        limit += 1
    return limit


@given(VALUES)
def test_both_walks_agree_at_every_limit_around_the_depth(value: Any) -> None:
    nested = levels(value)
    for limit in range(max(0, nested - 2), nested + 3):
        assert depth.too_deep(value, limit, encoded=1) == depth.too_deep(value, limit) == (nested > limit)


def test_a_deep_value_and_a_deep_stack() -> None:
    value: Any = "leaf"
    for n in range(depth.MAX_DEPTH + 1):
        value = {"k": value} if n % 3 == 0 else (value,) if n % 3 == 1 else [value]
    assert depth.too_deep(value, encoded=1) and not depth.too_deep(value, depth.MAX_DEPTH + 1, encoded=1)

    def at_depth(frames: int) -> bool:
        return at_depth(frames - 1) if frames else depth.too_deep(value, encoded=1)

    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(400)
    try:
        assert at_depth(320)  # the recursive walk runs out of stack there: the walk by levels answers
    finally:
        sys.setrecursionlimit(limit)
