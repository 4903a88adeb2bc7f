"""The manifest: an immutable, deterministic msgpack record of everything a checkpoint needs."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, NamedTuple

import msgpack

from ..errors import FormatError
from ..names import check_id, check_name
from .refs import EntryAddress, Ref, decode_ref, encode_ref, located, same_bytes, tuple_new

FORMAT = 1
MAP_STATE = "map"  # a mapping stored key by key
VALUE_STATE = "value"  # any other value, stored whole


class ValueRef(NamedTuple):
    """A state value: how its bytes encode it (`format`, and `items`, the item count: see serialization.values)
    and where they are. On disk the msgpack array [format, count, blob ref] (decode_value_ref, encode_value_ref);
    a named tuple as the refs are (format/refs.py), its count named `items` as tuple.count is taken."""

    format: int
    items: int
    blob: Ref

    def same_value(self, other: ValueRef) -> bool:
        """Whether both hold the same encoded value, nothing read (refs.same_bytes, and its hazard)."""
        return (self.format, self.items) == (other.format, other.items) and same_bytes(self.blob, other.blob)

    def located(self, home: EntryAddress) -> ValueRef:
        """The same value ref, valid from any entry (refs.located)."""
        blob = located(self.blob, home)
        return self if blob is self.blob else ValueRef(self.format, self.items, blob)


# The largest value (one state key's, or a whole state's) in bytes, encoded: a writer refuses a larger one at
# commit and a reader refuses a ref claiming more before reading it, so a value is never assembled past it
# (a tree repeating one chunk can claim any size at the cost of a few objects). Large data goes in artifacts.
MAX_VALUE = 1 << 30


@dataclasses.dataclass(frozen=True)
class Manifest:
    run: str
    id: str
    parent: str | None
    created: int
    writer: dict[str, Any]
    metadata: bytes
    state_kind: str
    state: dict[str, ValueRef]  # for VALUE_STATE the single key "" holds the value
    artifacts: dict[str, Ref]
    forked_from: list[str] | None = None
    schema: int | None = None  # the schema version the state was written with (absent: unversioned)

    def blob_refs(self) -> list[Ref]:
        """The blob ref of every value and artifact."""
        return [value.blob for value in self.state.values()] + list(self.artifacts.values())

    def to_bytes(self) -> bytes:
        record = {
            "format": FORMAT,
            "run": self.run,
            "id": self.id,
            "parent": self.parent,
            "created": self.created,
            "writer": self.writer,
            "metadata": self.metadata,
            "state": [self.state_kind, {key: encode_value_ref(value) for key, value in self.state.items()}],
            "artifacts": {name: encode_ref(ref) for name, ref in self.artifacts.items()},
        }
        if self.forked_from is not None:
            record["forked_from"] = self.forked_from
        if self.schema is not None:
            record["schema"] = self.schema
        return msgpack.packb(record, use_bin_type=True)

    @classmethod
    def from_bytes(cls, data: bytes, where: str) -> Manifest:
        try:
            record = msgpack.unpackb(data, raw=False, use_list=True, strict_map_key=True)
        except (ValueError, TypeError, msgpack.UnpackException) as exc:
            raise FormatError(f"{where}: manifest is not valid msgpack: {exc}") from None
        return _validate(record, where)


def _field(record: dict[str, Any], name: str, kinds: type | tuple[type, ...], where: str) -> Any:
    value = record.get(name)
    if not isinstance(value, kinds) or (isinstance(value, bool) and kinds is int):
        raise FormatError(f"{where}: manifest field {name!r} is malformed: {str(value)[:80]!r}")
    return value


def decode_value_ref(raw: Any, where: str) -> ValueRef:
    """The typed value ref of the msgpack array `raw`, refused unless well formed (as decode_ref)."""
    if not (isinstance(raw, list) and len(raw) == 3 and isinstance(raw[0], int) and isinstance(raw[1], int)):
        raise FormatError(f"{where}: malformed value reference {str(raw)[:120]}")
    return tuple_new(ValueRef, (raw[0], raw[1], decode_ref(raw[2], where)))  # tuple.__new__: see format/refs.py


def encode_value_ref(value: ValueRef) -> list[Any]:
    """The msgpack array of a value ref (decode_value_ref's inverse)."""
    return [value.format, value.items, encode_ref(value.blob)]


def _named(check: Callable[[], object], field: str, where: str) -> None:
    try:
        check()
    except ValueError as exc:
        raise FormatError(f"{where}: manifest field {field!r} is malformed: {exc}") from None


def _validate(record: Any, where: str) -> Manifest:
    if not isinstance(record, dict):
        raise FormatError(f"{where}: manifest is not a map")
    if record.get("format") != FORMAT:
        raise FormatError(f"{where}: manifest format {record.get('format')!r}, this agentfs reads {FORMAT}")
    try:
        run = check_name(_field(record, "run", str, where), "run")
        checkpoint_id = check_id(_field(record, "id", str, where))
        parent = record.get("parent")
        if parent is not None:
            _named(lambda: check_id(parent), "parent", where)
        forked_from = record.get("forked_from")
        if forked_from is not None:
            if not (isinstance(forked_from, list) and len(forked_from) == 2):
                raise FormatError(f"{where}: manifest field 'forked_from' is malformed")
            _named(lambda: (check_name(forked_from[0], "run"), check_id(forked_from[1])), "forked_from", where)
        schema = record.get("schema")
        if schema is not None and (type(schema) is not int or schema < 1):
            raise FormatError(f"{where}: manifest field 'schema' is malformed: {str(schema)[:80]!r}")
        state = _field(record, "state", list, where)
        if len(state) != 2 or state[0] not in (MAP_STATE, VALUE_STATE) or not isinstance(state[1], dict):
            raise FormatError(f"{where}: manifest field 'state' is malformed")
        values: dict[str, ValueRef] = {}
        for key, raw in state[1].items():
            if not isinstance(key, str):
                raise FormatError(f"{where}: state key {key!r} is not a string")
            values[key] = decode_value_ref(raw, f"{where} state[{key!r}]")
        artifacts: dict[str, Ref] = {}
        for name, raw in _field(record, "artifacts", dict, where).items():
            artifacts[check_name(name, "artifact")] = decode_ref(raw, f"{where} artifact {name!r}")
    except FormatError:
        raise
    except ValueError as exc:  # InvalidName from a tampered record
        raise FormatError(f"{where}: {exc}") from None
    return Manifest(
        run=run,
        id=checkpoint_id,
        parent=parent,
        created=_field(record, "created", int, where),
        writer=_field(record, "writer", dict, where),
        metadata=_field(record, "metadata", bytes, where),
        state_kind=state[0],
        state=values,
        artifacts=artifacts,
        forked_from=forked_from,
        schema=schema,
    )
