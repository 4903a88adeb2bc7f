"""How deeply a value nests containers: one limit, the same for a value committed and a value read.

A value's depth is 0 for a scalar (str, bytes, int, a datetime, a numpy array...) and 1 + the greatest
depth of its items for a container: a list, dict (keys and values), tuple, set, frozenset or an
instance of a registered class (its fields). `[[1]]` is 2 deep. A value deeper than MAX_DEPTH is
refused at commit (SerializationError naming where it is) and at read (FormatError naming the record).

Why a limit: decoding an ext record (a tuple, a set, a registered class) decodes its payload inside
msgpack's ext hook, one C call inside the other; 200 nested tuples overflowed an 8 MiB C stack with
`msgpack.unpackb` (its context, about 40 KiB, lives on the C stack) and killed the reader with SIGSEGV.
values.py decodes with `msgpack.Unpacker` objects (their context is on the heap: about 1 KiB of C stack
a level, measured: 100 levels run in a 128 KiB thread stack, 200 do not) and refuses an ext record
nested more than MAX_DEPTH deep before decoding it; tests/serialization/test_hostile_decode.py runs the limit and
one past it in a child process. The walk below is iterative: no value is too deep for it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from itertools import chain, compress
from typing import Any

from . import converters

MAX_DEPTH = 100
_SEQUENCES = {list, tuple, set, frozenset}
_is_container = converters.container_types.__contains__  # a C call per item: the walk's cost


def _fields(obj: Any) -> list[Any]:
    fields = converters._by_class[type(obj)].to_fields(obj)
    return list(fields.values()) if isinstance(fields, dict) else [fields]


def _items(level: list[Any]) -> list[Any]:
    """The items of every container in `level` (dict keys and values, registered classes' fields)."""
    kinds = set(map(type, level))
    registered: list[Any]
    if kinds == {dict}:  # the common levels (a list of messages, say) take one C pass each
        dicts, sequences, registered = level, [], []
    elif kinds <= _SEQUENCES:
        dicts, sequences, registered = [], level, []
    else:
        dicts = [c for c in level if type(c) is dict]
        sequences = [c for c in level if type(c) in _SEQUENCES]
        registered = [item for c in level if type(c) in converters._by_class for item in _fields(c)]
    return list(chain(chain.from_iterable(dicts), chain.from_iterable(map(dict.values, dicts)), chain.from_iterable(sequences), registered))


def too_deep(value: Any, limit: int = MAX_DEPTH, *, encoded: int | None = None) -> bool:
    """Whether `value` nests more than `limit` containers deep (a level at a time, never recursing). `encoded`: the
    length of its msgpack bytes, if known: a value of at most SMALL_VALUE is walked container by container instead,
    which costs it a seventh as much (a Strands message: 11 us against 1.5 us; each level's walk above makes
    sets and chains that pay off over wide levels, where it is up to a third faster)."""
    if encoded is not None and encoded <= SMALL_VALUE and _is_container(type(value)):
        try:
            return _deeper(value, limit)
        except RecursionError:  # a caller deep in its own stack: the walk that never recurses
            pass
    level = [value] if _is_container(type(value)) else []
    depth = 0
    while level:
        depth += 1
        if depth > limit:
            return True
        items = _items(level)
        if converters.container_types.isdisjoint(map(type, items)):
            return False
        level = list(compress(items, map(_is_container, map(type, items))))
    return False


SMALL_VALUE = 16 << 10  # encoded bytes: a packed value's largest (format.refs.PACK_MAX)


def _deeper(container: Any, remaining: int) -> bool:
    """Whether `container` nests more than `remaining` containers deep, itself counted: recursing, at most
    `remaining` + 1 calls deep (tests/serialization/test_depth.py compares it with the walk by levels)."""
    if remaining <= 0:
        return True
    kind = type(container)
    if kind is dict:
        for key, item in container.items():
            if (_is_container(type(item)) and _deeper(item, remaining - 1)) or (_is_container(type(key)) and _deeper(key, remaining - 1)):
                return True
        return False
    if kind in _SEQUENCES:
        for item in container:  # noqa: SIM110 (any() over a generator costs twice this loop for a list of messages)
            if _is_container(type(item)) and _deeper(item, remaining - 1):
                return True
        return False
    return too_deep(container, remaining)  # a registered class: its fields, by the walk by levels


def _steps(value: Any) -> Iterator[tuple[str, Any]]:
    if type(value) is dict:
        for key, item in value.items():
            yield f" key {key!r}", key
            yield f"[{json.dumps(key)}]" if isinstance(key, str) else f"[{key!r}]", item
    elif type(value) in converters._by_class:
        fields = converters._by_class[type(value)].to_fields(value)
        yield from ((f".{name}", item) for name, item in fields.items()) if isinstance(fields, dict) else [(".value", fields)]
    else:
        yield from ((f"[{index}]", item) for index, item in enumerate(value))


def deep_path(value: Any, path: str, limit: int = MAX_DEPTH) -> str:
    """The path of the first container nested `limit` + 1 deep in `value` (which too_deep() found)."""
    todo = [(path, value, 1)]
    while todo:
        where, container, depth = todo.pop()
        if depth > limit:
            return where
        todo.extend((where + step, item, depth + 1) for step, item in reversed(list(_steps(container))) if _is_container(type(item)))
    return path
