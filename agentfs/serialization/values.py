"""Packing a value to msgpack bytes and back, naming the path of any value that cannot be stored."""

from __future__ import annotations

import enum
import json
import reprlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

import msgpack

from ..errors import FormatError, SerializationError
from . import converters
from .depth import MAX_DEPTH, deep_path, too_deep

LIST_BODY = 1  # a list stored as its items' bytes, without the array header
MAP_BODY = 2  # a dict stored as its keys' and values' bytes, without the map header
PLAIN = 0
# how deep the (recursive) searches for an error's path go: a cycle within it is named as one, deeper ones are
# reported as too deep (tests/serialization/test_hostile_decode.py's depth sweep reaches 2,000)
SEARCH_DEPTH = 2 * MAX_DEPTH
BIN8, BIN16, BIN32 = b"\xc4", b"\xc5", b"\xc6"  # msgpack's bin headers
Path = str | Callable[[], str]  # where a value lies, for errors; a callable is called only to word an error


class _Unsupported(Exception):
    def __init__(self, obj: Any) -> None:
        self.obj = obj


class _TooDeep(Exception):
    """Ext records (tuples, sets, registered classes) nested more than MAX_DEPTH deep, found while packing."""


_PACK_ERRORS = (_Unsupported, _TooDeep, TypeError, ValueError, OverflowError, RecursionError)  # RecursionError: a cycle
_packers = threading.local()  # each thread's idle Packer: making one per value (msgpack.packb) costs more than a small pack
_packing = threading.local()  # .ext_level: how many ext records the pack in progress is inside
_unpacking = threading.local()  # .ext_level: the same for the unpack in progress


def _default(obj: Any) -> msgpack.ExtType:
    level = getattr(_packing, "ext_level", 0)
    if level >= MAX_DEPTH:  # refused before packing deeper: each level costs C stack
        raise _TooDeep()
    _packing.ext_level = level + 1
    try:
        ext = converters.to_ext(obj, _pack)
    finally:
        _packing.ext_level = level
    if ext is None:
        raise _Unsupported(obj)
    return msgpack.ExtType(*ext)


def _pack(value: Any) -> bytes:
    # the idle packer is taken while it packs: a value packed from _default (a converter's fields) meanwhile
    # makes its own. A Packer empties its buffer when a pack raises, so an error leaves it reusable
    packer = _packers.__dict__.pop("idle", None) or msgpack.Packer(default=_default, strict_types=True, use_bin_type=True, datetime=False)
    try:
        data = packer.pack(value)
        # msgpack wrote a bytearray as bin, which loads as bytes: pack again with it tagged. No bin header byte
        # anywhere in the output means no bin at all: the walk is skipped (it costs more than the pack)
        if (BIN8 in data or BIN16 in data or BIN32 in data) and _holds_bytearray(value):
            data = packer.pack(_tagged(value))
    finally:
        _packers.idle = packer
    return data


def _holds_bytearray(value: Any) -> bool:
    """Whether a bytearray sits in the dicts and lists msgpack packs itself (other containers go through
    _default, which packs their items with _pack). Only called after a successful pack: msgpack's nesting
    limit has refused any cycle, so the walk ends."""
    if type(value) is bytearray:
        return True
    if type(value) is not dict and type(value) is not list:
        return False
    todo = [value]
    while todo:
        container = todo.pop()
        for item in container.values() if type(container) is dict else container:
            kind = type(item)
            if kind is dict or kind is list:
                todo.append(item)
            elif kind is bytearray:
                return True
    return False


def _tagged(value: Any) -> Any:
    """`value` with each bytearray in its dicts and lists replaced by a BYTEARRAY ext record."""
    kind = type(value)
    if kind is bytearray:
        return msgpack.ExtType(converters.BYTEARRAY, bytes(value))
    if kind is dict:
        return {key: _tagged(item) for key, item in value.items()}
    if kind is list:
        return [_tagged(item) for item in value]
    return value


def _ext_hook(code: int, payload: bytes) -> Any:
    level = getattr(_unpacking, "ext_level", 0)
    if level >= MAX_DEPTH:  # refused before decoding its payload: each level costs C stack (depth.py)
        raise FormatError(f"ext records nest more than {MAX_DEPTH} deep (agentfs stores values at most {MAX_DEPTH} containers deep)")
    _unpacking.ext_level = level + 1
    try:
        return converters.from_ext(code, payload, _unpack, _iter_unpack)
    finally:
        _unpacking.ext_level = level


def _unpacker(data: bytes) -> msgpack.Unpacker:
    """An Unpacker holding `data`; not msgpack.unpackb, whose 40 KiB context lives on the C stack (depth.py).
    No length it reads can exceed len(data) (msgpack's max_*_len default to max_buffer_size)."""
    unpacker = msgpack.Unpacker(ext_hook=_ext_hook, raw=False, strict_map_key=False, max_buffer_size=max(len(data), 1))
    unpacker.feed(data)
    return unpacker


def _unpack(data: bytes) -> Any:
    unpacker = _unpacker(data)
    value = unpacker.unpack()
    if unpacker.tell() != len(data):
        raise FormatError(f"{len(data) - unpacker.tell()} bytes follow the value")
    return value


def _iter_unpack(data: bytes) -> list[Any]:
    return list(_unpacker(data))


def _index(key: Any) -> str:
    return f"[{json.dumps(key)}]" if isinstance(key, str) else f"[{key!r}]"


def _children(value: Any) -> Iterator[tuple[str, Any]]:
    if isinstance(value, dict):
        for key, item in value.items():
            yield _index(key), key
            yield _index(key), item
    elif isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            yield f"[{index}]", item
    elif isinstance(value, (set, frozenset)):
        for item in value:
            yield f" item {reprlib.repr(item)}", item
    else:
        registered = converters._by_class.get(type(value))
        if registered is not None:
            fields = registered.to_fields(value)
            if isinstance(fields, dict):
                for name, item in fields.items():
                    yield f".{name}", item


def _path_of(root: Any, target: Any, path: str, depth: int = 0) -> str | None:
    if root is target:
        return path
    if depth > SEARCH_DEPTH:
        return None
    for step, child in _children(root):
        found = _path_of(child, target, path + step, depth + 1)
        if found is not None:
            return found
    return None


def _describe(value: Any, path: str, exc: Exception) -> SerializationError:
    if isinstance(exc, _Unsupported):
        return SerializationError(_unsupported(exc.obj, _path_of(value, exc.obj, path) or path))
    cycle = _cycle(value, path)  # first: a cycle through a tuple also nests ext records without end
    if cycle is not None:
        return SerializationError(cycle)
    if isinstance(exc, _TooDeep) or too_deep(value):  # too_deep: msgpack's own limit, lists and dicts over 511 deep
        return _too_deep(value, path)
    return SerializationError(f"{_failing_leaf(value, path)} cannot be stored: {exc}")


def _unsupported(obj: Any, where: str) -> str:
    kind = type(obj)
    if kind is int:  # msgpack hands an int to the default hook only when it does not fit in 64 bits
        return (
            f"{where} is an int of {obj.bit_length()} bits, outside the range agentfs stores (-2**63 to 2**64-1); "
            "store it as a str or a decimal.Decimal"
        )
    name = f"{kind.__module__}.{kind.__qualname__}"
    dtype = getattr(obj, "dtype", None)
    if kind.__module__ == "numpy" and dtype is not None:  # plain dtypes have converters: this one holds objects or is structured
        return f"{where} is a {name} of dtype {dtype}, which agentfs cannot store without pickle; convert it to a list or a plain dtype"
    if hasattr(kind, "__dataclass_fields__") or hasattr(kind, "model_fields") or isinstance(obj, enum.Enum):
        return f"{where} is a {name}, which is not registered; register it with agentfs.register() (in every process that loads it)"
    return f"{where} is a {name}, which agentfs cannot store; convert it to a supported type"


def _cycle(root: Any, path: str) -> str | None:
    """Where `root` refers back to a container that holds it (a cycle), or None."""
    holding: dict[int, str] = {}  # id -> path of the containers from root down to the current value
    clear: set[int] = set()  # values already searched without finding a cycle

    def search(value: Any, where: str, depth: int) -> str | None:
        if id(value) in holding:
            return f"{where} is {holding[id(value)]} again: a value that contains itself cannot be stored"
        if id(value) in clear or depth > SEARCH_DEPTH:
            return None
        holding[id(value)] = where
        for step, child in _children(value):
            found = search(child, where + step, depth + 1)
            if found is not None:
                return found
        del holding[id(value)]
        clear.add(id(value))
        return None

    return search(root, path, 0)


def _failing_leaf(value: Any, path: str, depth: int = 0) -> str:
    """The path of the deepest value that fails to pack on its own (a lone surrogate, an int over 64 bits)."""
    if depth > SEARCH_DEPTH:
        return path
    for step, child in _children(value):
        try:
            _pack(child)
        except _PACK_ERRORS:
            return _failing_leaf(child, path + step, depth + 1)
    return path


def _too_deep(value: Any, path: str) -> SerializationError:
    return SerializationError(
        f"{deep_path(value, path)} is nested {MAX_DEPTH + 1} containers deep: agentfs stores values nested at most {MAX_DEPTH} deep"
    )


def _packed(value: Any, path: Path) -> bytes:
    """`value`'s msgpack bytes; SerializationError naming the path of what cannot be stored."""
    try:
        return _pack(value)
    except _PACK_ERRORS as exc:
        raise _describe(value, path if isinstance(path, str) else path(), exc) from None


def encode_value(value: Any, path: Path = "state") -> bytes:
    """msgpack bytes for `value`; SerializationError names the path of the first unsupported value, or of
    the first container nested deeper than MAX_DEPTH (a reader refuses those: depth.py)."""
    data = _packed(value, path)
    if too_deep(value, encoded=len(data)):
        raise _too_deep(value, path if isinstance(path, str) else path())
    return data


def copy_value(value: Any, path: str) -> Any:
    """A copy of `value` sharing no object with it, as the store gives it back once committed (packed and unpacked);
    SerializationError names the path of a value it cannot store. Its depth is not walked: a commit of it does that."""
    data = _packed(value, path)
    try:
        return _unpack(data)
    except Exception as exc:  # a registered converter that cannot rebuild what it packed
        raise SerializationError(f"{path} cannot be read back: {type(exc).__name__}: {exc}") from None


def _checked_depth(value: Any, where: str, encoded: int) -> Any:
    if too_deep(value, encoded=encoded):
        raise FormatError(f"{where} nests containers more than {MAX_DEPTH} deep; refused")
    return value


def decode_value(data: bytes, where: str) -> Any:
    try:
        value = _unpack(data)
    except FormatError as exc:
        raise FormatError(f"{where}: {exc}") from None
    except Exception as exc:  # any converter fed a crafted record: never let it pass as another error
        raise FormatError(f"{where} is not a valid value record: {type(exc).__name__}: {exc}") from None
    return _checked_depth(value, where, len(data))


def _header_size(first: int) -> int:
    if 0x80 <= first <= 0x9F:  # fixmap, fixarray
        return 1
    if first in (0xDC, 0xDE):  # array16, map16
        return 3
    if first in (0xDD, 0xDF):  # array32, map32
        return 5
    raise ValueError(f"not a container header: {first:#x}")


def encode_body(value: Any, path: Path = "state") -> tuple[int, int, bytes]:
    """(format, item count, bytes) for `value`.

    Lists and dicts drop their header, so appending an item changes only the tail of the bytes
    and content-defined chunking keeps every earlier chunk.
    """
    data = encode_value(value, path)
    if type(value) is list:
        return LIST_BODY, len(value), data[_header_size(data[0]) :]
    if type(value) is dict:
        return MAP_BODY, len(value), data[_header_size(data[0]) :]
    return PLAIN, 1, data


def decode_body(fmt: int, count: int, data: bytes, where: str) -> Any:
    if fmt == PLAIN:
        return decode_value(data, where)
    if fmt not in (LIST_BODY, MAP_BODY) or not isinstance(count, int) or count < 0:
        raise FormatError(f"{where}: unknown value format {fmt!r} with count {count!r}")
    try:
        items = _iter_unpack(data)
    except FormatError as exc:
        raise FormatError(f"{where}: {exc}") from None
    except Exception as exc:  # any converter fed a crafted record: never let it pass as another error
        raise FormatError(f"{where} is not a valid value record: {type(exc).__name__}: {exc}") from None
    expected = count if fmt == LIST_BODY else 2 * count
    if len(items) != expected:
        raise FormatError(f"{where} declares {count} items but holds {len(items)} records")
    if fmt == LIST_BODY:
        return _checked_depth(items, where, len(data))
    try:
        return _checked_depth(dict(zip(items[::2], items[1::2], strict=True)), where, len(data))
    except TypeError as exc:  # a key msgpack decoded as a list or dict (unhashable): crafted, never written
        raise FormatError(f"{where} is not a valid value record: a map key is {exc}") from None
