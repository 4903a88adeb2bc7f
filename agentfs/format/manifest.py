"""The manifest: an immutable, deterministic msgpack record of everything a checkpoint needs.

Format 2 (written now) is a positional array without the checkpoint's run and id, which its record key carries
(the log entry's checksum covers that key: format/entries.py); format 1, a map naming every field, is still read.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any, NamedTuple

import msgpack

from ..errors import FormatError
from ..ids import id_bytes, id_of_bytes
from ..names import ID, check_id, check_name
from .refs import EntryAddress, Ref, decode_ref, encode_ref, located, same_bytes, tuple_new

FORMAT = 2  # what a writer writes: the array (docs/FORMAT.md, "Manifest")
MAP_FORMAT = 1  # the map, which held the run and id too: read, never written
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
        """Format 2: [2, parent, created, writer, metadata, state kind, state, artifacts, optional fields]."""
        optional: dict[str, Any] = {}
        if self.forked_from is not None:
            optional["forked_from"] = [self.forked_from[0], _compact_id(self.forked_from[1])]
        if self.schema is not None:
            optional["schema"] = self.schema
        record = [
            FORMAT,
            None if self.parent is None else _compact_id(self.parent),
            self.created,
            _compact_writer(self.writer),
            self.metadata,
            STATE_KINDS.index(self.state_kind),
            {key: encode_value_ref(value) for key, value in self.state.items()},
            {name: encode_ref(ref) for name, ref in self.artifacts.items()},
            optional,
        ]
        return msgpack.packb(record, use_bin_type=True)

    @classmethod
    def from_bytes(cls, data: bytes, run: str, checkpoint_id: str, where: str, formats: tuple[int, ...] = (MAP_FORMAT, FORMAT)) -> Manifest:
        """The manifest of checkpoint `run`@`checkpoint_id` (its record key's: a format-2 manifest does not repeat
        them; a format-1 one does, and is returned with its own for the caller to compare), refused unless its
        format is one of `formats` and every field is well formed."""
        try:
            record = msgpack.unpackb(data, raw=False, use_list=True, strict_map_key=True)
        except (ValueError, TypeError, msgpack.UnpackException) as exc:
            raise FormatError(f"{where}: manifest is not valid msgpack: {exc}") from None
        if isinstance(record, list):
            version = record[0] if record else None
        elif isinstance(record, dict):
            version = record.get("format")
        else:
            raise FormatError(f"{where}: manifest is neither an array nor a map")
        if version not in formats or isinstance(record, list) != (version == FORMAT):  # format 1 is a map, 2 an array
            known = " or ".join(str(known) for known in formats)
            raise FormatError(f"{where}: manifest format {str(version)[:40]}, this agentfs reads {known} here")
        if isinstance(record, list):
            return _validate_array(record, run, checkpoint_id, where)
        return _validate(record, where)


STATE_KINDS = (MAP_STATE, VALUE_STATE)  # format 2 stores a state's kind as its index here
_FIELDS = ("format", "parent", "created", "writer", "metadata", "state kind", "state", "artifacts", "optional fields")


def _compact_id(checkpoint_id: str) -> bytes | str:
    """An id as its 16 bytes, or as its 26 digits when it is past 2^128 (only a tampered format-1 manifest, copied
    faithfully, can hold one)."""
    packed = id_bytes(checkpoint_id)
    return checkpoint_id if packed is None else packed


def _read_id(raw: Any, field: str, where: str) -> str:
    if isinstance(raw, bytes) and len(raw) == 16:
        return id_of_bytes(raw)
    if isinstance(raw, str) and raw[:1] > "7":
        _named(lambda: check_id(raw), field, where)
        return raw
    raise FormatError(f"{where}: manifest field {field!r} is malformed: {str(raw)[:80]!r}")


WRITER_FIELDS = ("store", "host", "pid")


def _compact_writer(writer: dict[str, Any]) -> list[Any] | dict[str, Any]:
    """[store id's 16 bytes, host, pid] for the writer every agentfs makes (engine: Repository.writer); any other
    map (a format-1 manifest's, copied faithfully) as it is."""
    if tuple(writer) != WRITER_FIELDS:
        return writer
    store, host, pid = writer.values()
    packed = _store_bytes(store) if isinstance(store, str) else None
    return [packed, host, pid] if packed is not None and isinstance(host, str) and type(pid) is int else writer


@functools.lru_cache(maxsize=64)
def _store_bytes(store: str) -> bytes | None:
    """The 16 bytes of a store id, None if it is no ULID: one per store, met at every commit."""
    return id_bytes(store) if ID.fullmatch(store) else None


@functools.lru_cache(maxsize=64)
def _store_id(data: bytes) -> str:
    return id_of_bytes(data)


def _read_writer(raw: Any, where: str) -> dict[str, Any]:
    if isinstance(raw, dict):
        return raw
    if isinstance(raw, list) and len(raw) == 3:
        store, host, pid = raw
        if isinstance(store, bytes) and len(store) == 16 and isinstance(host, str) and type(pid) is int:
            return {"store": _store_id(store), "host": host, "pid": pid}
    raise FormatError(f"{where}: manifest field 'writer' is malformed: {str(raw)[:80]!r}")


def _validate_array(record: list[Any], run: str, checkpoint_id: str, where: str) -> Manifest:
    if len(record) != len(_FIELDS):
        raise FormatError(f"{where}: manifest holds {len(record)} fields, format {FORMAT} has {len(_FIELDS)}")
    _format, parent_raw, created, writer_raw, metadata, kind, state, artifacts_raw, optional = record
    if type(created) is not int:
        raise FormatError(f"{where}: manifest field 'created' is malformed: {str(created)[:80]!r}")
    if not isinstance(metadata, bytes):
        raise FormatError(f"{where}: manifest field 'metadata' is malformed: {str(metadata)[:80]!r}")
    if type(kind) is not int or not 0 <= kind < len(STATE_KINDS) or not isinstance(state, dict):
        raise FormatError(f"{where}: manifest field 'state' is malformed")
    if not isinstance(artifacts_raw, dict):
        raise FormatError(f"{where}: manifest field 'artifacts' is malformed: {str(artifacts_raw)[:80]!r}")
    if not isinstance(optional, dict):
        raise FormatError(f"{where}: manifest's optional fields are not a map: {str(optional)[:80]!r}")
    forked_raw, schema = optional.get("forked_from"), optional.get("schema")
    forked_from = None
    if forked_raw is not None:
        if not (isinstance(forked_raw, list) and len(forked_raw) == 2):
            raise FormatError(f"{where}: manifest field 'forked_from' is malformed")
        _named(lambda: check_name(forked_raw[0], "run"), "forked_from", where)
        forked_from = [forked_raw[0], _read_id(forked_raw[1], "forked_from", where)]
    if schema is not None and (type(schema) is not int or schema < 1):
        raise FormatError(f"{where}: manifest field 'schema' is malformed: {str(schema)[:80]!r}")
    return Manifest(
        run=run,
        id=checkpoint_id,
        parent=None if parent_raw is None else _read_id(parent_raw, "parent", where),
        created=created,
        writer=_read_writer(writer_raw, where),
        metadata=metadata,
        state_kind=STATE_KINDS[kind],
        state=_state(state, where),
        artifacts=_artifacts(artifacts_raw, where),
        forked_from=forked_from,
        schema=schema,
    )


def _state(raw: dict[Any, Any], where: str) -> dict[str, ValueRef]:
    values: dict[str, ValueRef] = {}
    for key, value in raw.items():
        if not isinstance(key, str):
            raise FormatError(f"{where}: state key {key!r} is not a string")
        values[key] = decode_value_ref(value, f"{where} state[{key!r}]")
    return values


def _artifacts(raw: dict[Any, Any], where: str) -> dict[str, Ref]:
    artifacts: dict[str, Ref] = {}
    for name, value in raw.items():
        try:
            check_name(name, "artifact")
        except ValueError as exc:  # InvalidName
            raise FormatError(f"{where}: manifest field 'artifacts' is malformed: {exc}") from None
        artifacts[name] = decode_ref(value, f"{where} artifact {name!r}")
    return artifacts


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
        values = _state(state[1], where)
        artifacts = _artifacts(_field(record, "artifacts", dict, where), where)
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
