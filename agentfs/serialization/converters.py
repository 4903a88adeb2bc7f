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

TUPLE, SET, FROZENSET, DATETIME, DATE, TIME, TIMEDELTA, UUID, DECIMAL = range(1, 10)
# 10 is never written: msgpack packs bytearray (and memoryview) as bin itself, before any default hook;
# values.py tags bytearrays as BYTEARRAY instead. Data written before it loads them as bytes.
NDARRAY, NPSCALAR, REGISTERED, BYTEARRAY = 11, 12, 13, 14

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
# what counts as a level of nesting (depth.py): msgpack's containers, the ext records holding values, registered classes
container_types: set[type] = {list, dict, tuple, set, frozenset}


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
            if not isinstance(fields, dict) or set(fields) != set(field_names):
                raise FormatError(
                    f"stored {name!r} has fields {sorted(fields) if isinstance(fields, dict) else fields!r}, expected {field_names}"
                )
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
    container_types.add(cls)
    return cls


def _tz_fields(tz: dt.tzinfo | None, at: dt.datetime | None) -> Any:
    if tz is None:
        return None
    if isinstance(tz, zoneinfo.ZoneInfo):
        return ["zone", tz.key]
    offset = tz.utcoffset(at)
    if offset is None:
        return None
    fields: list[Any] = ["offset", offset.days, offset.seconds, offset.microseconds]
    if isinstance(tz, dt.timezone) and tz.tzname(None) != dt.timezone(offset).tzname(None):
        fields.append(tz.tzname(None))  # a named fixed offset, e.g. timezone(timedelta(hours=1), "CET")
    return fields


def _tz_from(fields: Any) -> dt.tzinfo | None:
    if fields is None:
        return None
    if fields[0] == "zone":
        try:
            return zoneinfo.ZoneInfo(fields[1])
        except (zoneinfo.ZoneInfoNotFoundError, ValueError, TypeError) as exc:
            raise FormatError(f"time zone {fields[1]!r} is not in this machine's tz database: {exc}") from None
    if fields[0] == "offset":
        offset = dt.timedelta(days=fields[1], seconds=fields[2], microseconds=fields[3])
        if len(fields) == 5:
            return dt.timezone(offset, fields[4])
        return dt.timezone.utc if not offset else dt.timezone(offset)
    raise FormatError(f"unknown time zone record {fields!r}")


def _plain_dtype(numpy: Any, name: Any) -> Any:
    dtype = numpy.dtype(name)
    if dtype.hasobject or dtype.kind == "V":
        raise FormatError(f"numpy dtype {dtype} would need pickle or a structured layout; refused")
    return dtype


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
    registered = _by_class.get(kind)
    if registered is not None:
        return REGISTERED, pack([registered.name, registered.to_fields(obj)])
    if kind.__module__ == "numpy":
        numpy = _numpy()
        if isinstance(obj, numpy.ndarray) and not obj.dtype.hasobject and obj.dtype.kind != "V":
            return NDARRAY, pack([obj.dtype.str, list(obj.shape), obj.tobytes(order="C")])
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
        year, month, day, hour, minute, second, micro, fold, tz = unpack(payload)
        return dt.datetime(year, month, day, hour, minute, second, micro, fold=fold, tzinfo=_tz_from(tz))
    if code == DATE:
        return dt.date.fromordinal(unpack(payload))
    if code == TIME:
        hour, minute, second, micro, fold, tz = unpack(payload)
        return dt.time(hour, minute, second, micro, fold=fold, tzinfo=_tz_from(tz))
    if code == TIMEDELTA:
        return dt.timedelta(*unpack(payload))
    if code == UUID:
        return uuid.UUID(bytes=payload)
    if code == BYTEARRAY:
        return bytearray(payload)
    if code == DECIMAL:
        try:
            return decimal.Decimal(payload.decode())
        except (decimal.InvalidOperation, UnicodeDecodeError):
            raise FormatError(f"stored Decimal {payload[:40]!r} is malformed") from None
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
            dtype = _plain_dtype(numpy, dtype)
            if dtype.itemsize == 0:
                return numpy.zeros(shape, dtype=dtype)
            return numpy.frombuffer(data, dtype=dtype).reshape(shape)  # zero-copy: a read-only view
        dtype, data = unpack(payload)
        dtype = _plain_dtype(numpy, dtype)
        if dtype.itemsize == 0:
            return dtype.type()
        return numpy.frombuffer(data, dtype=dtype)[0]
    raise FormatError(f"unknown ext type {code} in stored data")
