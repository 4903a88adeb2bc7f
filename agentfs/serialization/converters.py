"""Converters between Python types and msgpack ext records, looked up by ext code or registered name.

Decoding only ever calls a converter registered here (or a class the user registered by name):
nothing named in the data is imported.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import enum
import uuid
import zoneinfo
from collections.abc import Callable
from typing import Any

from ..errors import FormatError, SerializationError

TUPLE, SET, FROZENSET, DATETIME, DATE, TIME, TIMEDELTA, UUID, DECIMAL, BYTEARRAY = range(1, 11)
NDARRAY, NPSCALAR, REGISTERED = 11, 12, 13

Pack = Callable[[Any], bytes]
Unpack = Callable[[bytes], Any]


@dataclasses.dataclass(frozen=True)
class Registered:
    """A user class stored by name: a dataclass, a pydantic model or an Enum."""

    cls: type
    name: str
    to_fields: Callable[[Any], Any]
    from_fields: Callable[[Any], Any]


_by_name: dict[str, Registered] = {}
_by_class: dict[type, Registered] = {}


def register(cls: type, name: str | None = None) -> type:
    """Allow `cls` (dataclass, pydantic model or Enum) in states; usable as a class decorator.

    It is stored under `name` (default: module.qualname); loading finds the class in this registry
    only, so a process must register the same classes before it loads them.
    """
    name = name or f"{cls.__module__}.{cls.__qualname__}"
    if dataclasses.is_dataclass(cls):
        field_names = [f.name for f in dataclasses.fields(cls)]

        def to_fields(obj: Any) -> Any:
            return {n: getattr(obj, n) for n in field_names}

        def from_fields(fields: Any) -> Any:
            obj = object.__new__(cls)
            for key, value in fields.items():
                object.__setattr__(obj, key, value)  # frozen dataclasses too, no __init__ side effects
            return obj

    elif hasattr(cls, "model_validate") and hasattr(cls, "model_dump"):

        def to_fields(obj: Any) -> Any:
            return {n: getattr(obj, n) for n in type(obj).model_fields}

        def from_fields(fields: Any) -> Any:
            return cls.model_validate(fields)  # type: ignore[attr-defined]

    elif issubclass(cls, enum.Enum):

        def to_fields(obj: Any) -> Any:
            return obj.value

        def from_fields(fields: Any) -> Any:
            return cls(fields)

    else:
        raise SerializationError(f"register() takes a dataclass, a pydantic model or an Enum, not {cls!r}")
    entry = Registered(cls, name, to_fields, from_fields)
    _by_name[name] = entry
    _by_class[cls] = entry
    return cls


def _tz_fields(tz: dt.tzinfo | None, at: dt.datetime | None) -> Any:
    if tz is None:
        return None
    if isinstance(tz, zoneinfo.ZoneInfo):
        return ["zone", tz.key]
    offset = tz.utcoffset(at)
    if offset is None:
        return None
    return ["offset", offset.days, offset.seconds, offset.microseconds]


def _tz_from(fields: Any) -> dt.tzinfo | None:
    if fields is None:
        return None
    if fields[0] == "zone":
        return zoneinfo.ZoneInfo(fields[1])
    if fields[0] == "offset":
        offset = dt.timedelta(days=fields[1], seconds=fields[2], microseconds=fields[3])
        return dt.timezone.utc if not offset else dt.timezone(offset)
    raise FormatError(f"unknown time zone record {fields!r}")


def _numpy() -> Any:
    import numpy  # only ever imported to decode an array, never named by data

    return numpy


def to_ext(obj: Any, pack: Pack) -> tuple[int, bytes] | None:
    """(ext code, payload) for a supported non-msgpack value, or None if it has no converter."""
    kind = type(obj)
    if kind is tuple:
        return TUPLE, pack(list(obj))
    if kind is set or kind is frozenset:
        items = b"".join(sorted(pack(item) for item in obj))  # sorted: the same set, the same bytes
        return (SET if kind is set else FROZENSET), pack(len(obj)) + items
    if kind is dt.datetime:
        fields = [obj.year, obj.month, obj.day, obj.hour, obj.minute, obj.second, obj.microsecond, obj.fold]
        return DATETIME, pack([*fields, _tz_fields(obj.tzinfo, obj)])
    if kind is dt.date:
        return DATE, pack(obj.toordinal())
    if kind is dt.time:
        fields = [obj.hour, obj.minute, obj.second, obj.microsecond, obj.fold]
        return TIME, pack([*fields, _tz_fields(obj.tzinfo, None)])
    if kind is dt.timedelta:
        return TIMEDELTA, pack([obj.days, obj.seconds, obj.microseconds])
    if kind is uuid.UUID:
        return UUID, obj.bytes
    if kind is decimal.Decimal:
        return DECIMAL, str(obj).encode()
    if kind is bytearray:
        return BYTEARRAY, bytes(obj)
    registered = _by_class.get(kind)
    if registered is not None:
        return REGISTERED, pack([registered.name, registered.to_fields(obj)])
    if kind.__module__ == "numpy":
        numpy = _numpy()
        if isinstance(obj, numpy.ndarray) and not obj.dtype.hasobject and obj.dtype.kind != "V":
            data = numpy.ascontiguousarray(obj)
            return NDARRAY, pack([data.dtype.str, list(data.shape), data.tobytes()])
        if isinstance(obj, numpy.generic) and not obj.dtype.hasobject and obj.dtype.kind != "V":
            return NPSCALAR, pack([obj.dtype.str, obj.tobytes()])
    return None


def from_ext(code: int, payload: bytes, unpack: Unpack, iter_unpack: Callable[[bytes], Any]) -> Any:
    """The value for an ext record; raises FormatError for a code or name nobody registered."""
    if code == TUPLE:
        return tuple(unpack(payload))
    if code in (SET, FROZENSET):
        count, *items = iter_unpack(payload)
        if len(items) != count:
            raise FormatError(f"set record declares {count} items, holds {len(items)}")
        return set(items) if code == SET else frozenset(items)
    if code == DATETIME:
        *fields, fold, tz = unpack(payload)
        return dt.datetime(*fields, fold=fold, tzinfo=_tz_from(tz))
    if code == DATE:
        return dt.date.fromordinal(unpack(payload))
    if code == TIME:
        *fields, fold, tz = unpack(payload)
        return dt.time(*fields, fold=fold, tzinfo=_tz_from(tz))
    if code == TIMEDELTA:
        return dt.timedelta(*unpack(payload))
    if code == UUID:
        return uuid.UUID(bytes=payload)
    if code == DECIMAL:
        return decimal.Decimal(payload.decode())
    if code == BYTEARRAY:
        return bytearray(payload)
    if code == REGISTERED:
        name, fields = unpack(payload)
        registered = _by_name.get(name)
        if registered is None:
            raise FormatError(f"state holds a {name!r}, which is not registered in this process; call agentfs.register() for it")
        return registered.from_fields(fields)
    if code in (NDARRAY, NPSCALAR):
        numpy = _numpy()
        if code == NDARRAY:
            dtype, shape, data = unpack(payload)
            dtype = numpy.dtype(dtype)
            if dtype.hasobject:
                raise FormatError(f"array of dtype {dtype} would need pickle; refused")
            return numpy.frombuffer(data, dtype=dtype).reshape(shape)  # zero-copy: a read-only view
        dtype, data = unpack(payload)
        dtype = numpy.dtype(dtype)
        if dtype.hasobject:
            raise FormatError(f"scalar of dtype {dtype} would need pickle; refused")
        return numpy.frombuffer(data, dtype=dtype)[0]
    raise FormatError(f"unknown ext type {code} in stored data")
