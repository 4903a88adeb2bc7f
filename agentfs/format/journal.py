"""Journal records: one sealed record per event of a tool call (its start, then its ok or error end).

"AFJ" | version (1 byte) | sha256(body) (32 bytes) | body, body = a msgpack map (see Record.to_bytes)
"""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

import msgpack

from ..errors import FormatError, InvalidName, NotFound
from ..names import ID, check_name
from ..serialization import decode_value
from .sealed import seal, unseal

MAGIC = b"AFJ"
VERSION = 1
FORMAT = 1
START, OK, ERROR = "start", "ok", "error"
MAX_KEY = 1024


@dataclasses.dataclass(frozen=True)
class Record:
    """One journal event. A start's `call` is its own id; an end's is the id of the start it ends."""

    run: str
    id: str
    kind: str  # START, OK or ERROR
    key: str
    call: str
    name: str
    created: int  # ns since the epoch
    writer: dict[str, Any]  # {"store", "host", "pid"}
    args: bytes | None = None  # start: the encoded args
    result: bytes | None = None  # ok: the encoded result, unless
    unrecorded: str | None = None  # ok: why the result could not be recorded
    error: dict[str, str] | None = None  # error: {"type": "module.QualName", "message": str}

    def to_bytes(self) -> bytes:
        body: dict[str, Any] = {
            "format": FORMAT,
            "run": self.run,
            "id": self.id,
            "kind": self.kind,
            "key": self.key,
            "call": self.call,
            "name": self.name,
            "created": self.created,
            "writer": self.writer,
        }
        for field in ("args", "result", "unrecorded", "error"):
            if getattr(self, field) is not None:
                body[field] = getattr(self, field)
        return seal(MAGIC, VERSION, msgpack.packb(body, use_bin_type=True))

    @property
    def created_at(self) -> dt.datetime:
        return utc(self.created)

    def value(self, field: str) -> Any:
        """The decoded "args" (of a start) or "result" (of an ok end that recorded it)."""
        data = getattr(self, field)
        if data is None:
            raise NotFound(f"journal record {self.run}/{self.id} ({self.kind}) holds no {field}")
        return decode_value(data, f"journal record {self.run}/{self.id} {field}")


def decode_record(data: bytes, run: str, record_id: str, where: str) -> Record:
    """The record in `data`, which must be record `record_id` of `run`; IntegrityError or FormatError otherwise.

    `where` names the bytes' origin in messages ("journal record <where> ...").
    """
    body = unseal(data, MAGIC, VERSION, "journal record", where)
    where = f"journal record {where}"
    try:
        fields = msgpack.unpackb(body, raw=False, use_list=True, strict_map_key=True)
    except (ValueError, TypeError, msgpack.UnpackException) as exc:
        raise FormatError(f"{where} is not valid msgpack: {exc}") from None
    record = _validate(fields, where)
    if (record.run, record.id) != (run, record_id):
        raise FormatError(f"{where} holds record {record.id} of run {record.run!r}")
    return record


def _validate(fields: Any, where: str) -> Record:
    if type(fields) is not dict:
        raise FormatError(f"{where} is not a map")

    def get(name: str, kind: type) -> Any:
        value = fields.get(name)
        if type(value) is not kind:  # msgpack yields exact builtin types; this also refuses a bool for an int
            raise FormatError(f"{where}: field {name!r} is malformed: {str(value)[:80]!r}")
        return value

    if get("format", int) != FORMAT:
        raise FormatError(f"{where} has record format {fields['format']}, this agentfs reads {FORMAT}")
    kind = get("kind", str)
    if kind not in (START, OK, ERROR):
        raise FormatError(f"{where}: unknown kind {kind[:40]!r}")
    record_id, call = get("id", str), get("call", str)
    if not ID.fullmatch(record_id) or not ID.fullmatch(call) or (kind == START) != (call == record_id):
        raise FormatError(f"{where}: malformed id {record_id[:40]!r} or call {call[:40]!r}")
    try:
        run = check_name(get("run", str), "run")
        key = check_key(get("key", str))
        name = check_key(get("name", str), "tool name")
    except InvalidName as exc:
        raise FormatError(f"{where}: {exc}") from None
    writer = get("writer", dict)
    if not (type(writer.get("store")) is str and type(writer.get("host")) is str and type(writer.get("pid")) is int):
        raise FormatError(f"{where}: field 'writer' is malformed")
    record = Record(run=run, id=record_id, kind=kind, key=key, call=call, name=name, created=get("created", int), writer=writer)
    if kind == START:
        return dataclasses.replace(record, args=get("args", bytes))
    if kind == OK:
        if "result" in fields:
            return dataclasses.replace(record, result=get("result", bytes))
        return dataclasses.replace(record, unrecorded=get("unrecorded", str))
    error = get("error", dict)
    if not (type(error.get("type")) is str and type(error.get("message")) is str):
        raise FormatError(f"{where}: field 'error' is malformed")
    return dataclasses.replace(record, error={"type": error["type"], "message": error["message"]})


def check_key(key: object, what: str = "key") -> str:
    """Keys and tool names are any str of 1 to 1024 characters (they never become paths)."""
    if not isinstance(key, str):
        raise InvalidName(f"journal {what} must be a str, got {type(key).__name__}: {key!r}"[:200])
    if not key or len(key) > MAX_KEY:
        raise InvalidName(f"journal {what} {key[:40]!r} must be 1 to {MAX_KEY} characters, not {len(key)}")
    try:
        key.encode()
    except UnicodeEncodeError:
        raise InvalidName(f"journal {what} {key[:40]!r} holds a lone surrogate, which is not UTF-8") from None
    return key


def utc(ns: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(ns / 1e9, tz=dt.timezone.utc)
