"""The serializer reuses one msgpack Packer per thread: a failed pack, a pack nested in a converter
and packs on other threads at once must each still give exactly their own value's bytes."""

from __future__ import annotations

import dataclasses
import datetime as dt
import threading

import msgpack
import pytest

import agentfs
from agentfs.errors import SerializationError
from agentfs.serialization import decode_value, encode_value

pytestmark = pytest.mark.timeout(60)


@agentfs.register
@dataclasses.dataclass
class Inner:
    data: bytearray
    when: dt.datetime


@agentfs.register
@dataclasses.dataclass
class Outer:
    name: str
    inner: Inner
    pairs: tuple[tuple[int, ...], ...]


def _outer(i: int) -> Outer:
    inner = Inner(bytearray(b"x" * (i % 50)), dt.datetime(2026, 1, 1, i % 24, tzinfo=dt.timezone.utc))
    return Outer(f"o{i}", inner, ((i, i + 1), (i + 2,)))


def test_a_pack_that_fails_midway_leaves_nothing_for_the_next() -> None:
    plain = {"messages": ["m" * 300] * 20, "step": 3}
    with pytest.raises(SerializationError, match=r"state\[\"messages\"\]\[2\]"):
        encode_value({"messages": ["m" * 300, "n", object()]}, "state")
    assert encode_value(plain) == msgpack.packb(plain, use_bin_type=True)


def test_values_packed_inside_converters_get_their_own_bytes() -> None:
    value = [_outer(i) for i in range(30)]
    assert decode_value(encode_value(value), "test") == value


def test_threads_packing_at_once_each_get_their_own_value() -> None:
    wrong: list[int] = []
    start = threading.Barrier(8)

    def pack_many(first: int) -> None:
        start.wait()
        for i in range(first, first + 300):
            value = {"i": i, "outer": _outer(i), "text": str(i) * 50}
            if decode_value(encode_value(value), "test") != value:
                wrong.append(i)

    threads = [threading.Thread(target=pack_many, args=(n * 1000,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert not wrong
