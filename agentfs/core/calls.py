"""What a journal's records say about its calls: each key's latest attempt, and the values and texts records hold."""

from __future__ import annotations

import dataclasses
import datetime as dt
from collections.abc import Callable
from typing import Any

import msgpack

from ..errors import FormatError, InFlight, NotFound, SerializationError
from ..format.journal import ERROR, MAX_KEY, OK, START, Record, utc
from ..ids import id_time_ns
from ..serialization import encode_value

MAX_MESSAGE = 4096
MAX_VALUE = 16 << 20  # an encoded args or result; remotes cap a record at 64 MiB
IN_FLIGHT = "in_flight"
ABANDONED = "agentfs.Abandoned"  # the error type abandon() records
CANCELLED = "asyncio.CancelledError"  # the error type an async call cancelled before it ran records


@dataclasses.dataclass(frozen=True)
class Call:
    """A key's latest attempt: its start record and the end record that names it (None while in flight).

    `start` is None only when the start record is damaged but its end is readable.
    """

    key: str
    start_id: str
    attempts: int  # starts recorded for the key
    start: Record | None = dataclasses.field(repr=False)
    end: Record | None = dataclasses.field(repr=False)

    @property
    def status(self) -> str:
        """OK, ERROR or IN_FLIGHT ("in_flight": started, no end recorded, so it may or may not have happened)."""
        return IN_FLIGHT if self.end is None else self.end.kind

    @property
    def _record(self) -> Record:
        record = self.start or self.end
        assert record is not None  # a Call is built from at least one record
        return record

    @property
    def run(self) -> str:
        return self._record.run

    @property
    def name(self) -> str:
        return self._record.name

    @property
    def writer(self) -> dict[str, Any]:
        """Who started the call (who ended it, if the start record is damaged)."""
        return dict(self._record.writer)

    @property
    def started(self) -> dt.datetime:
        return self.start.created_at if self.start else utc(id_time_ns(self.start_id))

    @property
    def finished(self) -> dt.datetime | None:
        return None if self.end is None else self.end.created_at

    @property
    def end_id(self) -> str | None:
        return None if self.end is None else self.end.id

    @property
    def args(self) -> Any:
        if self.start is None:
            raise FormatError(f"{self}: its start record is damaged, so its args are unknown")
        return self.start.value("args")

    @property
    def unrecorded(self) -> str | None:
        """Why a successful call's result was not recorded (None if it was)."""
        return None if self.end is None else self.end.unrecorded

    @property
    def result(self) -> Any:
        """The recorded result of a successful call; raises for any other."""
        if self.end is None:
            raise in_flight_error(self)
        if self.end.kind == ERROR:
            raise NotFound(f"{self} ended with an error ({describe_error(self.error)}): it has no result")
        if self.end.result is None:
            raise SerializationError(
                f"{self} succeeded, but its result was not recorded: {self.end.unrecorded}. "
                "It counts as done; call it under a new key to run it again"
            )
        return self.end.value("result")

    @property
    def error(self) -> dict[str, str] | None:
        return None if self.end is None or self.end.error is None else dict(self.end.error)

    def __str__(self) -> str:
        return f"call {self.key!r} of run {self.run!r}"


def in_flight_error(call: Call) -> InFlight:
    writer = call.writer
    return InFlight(
        f"{call} started at {call.started.isoformat(timespec='milliseconds')} on host {writer['host']} (pid {writer['pid']}) "
        "and never recorded an end: it may or may not have happened. If that process is still running, wait for it; "
        "if it died, check whether the call's side effect took place, then, to run it again, "
        f"call run.journal.abandon({call.key!r}, reason) and retry"
    )


def calls_of(records: list[Record]) -> list[Call]:
    """One Call per key, in the order of its first attempt. `records` must be in id order.

    A key's latest attempt is its greatest start id, also counting starts known only from their
    end (a damaged start record): the end still tells whether the call happened.
    """
    attempts: dict[str, list[str]] = {}  # key -> its start ids, in order
    starts: dict[tuple[str, str], Record] = {}
    ends: dict[tuple[str, str], Record] = {}
    for record in records:
        where = (record.key, record.call)
        if record.kind == START:
            starts[where] = record
        elif where not in ends or (record.kind == OK and ends[where].kind != OK):  # abandoned, then it finished after all
            ends[where] = record
        known = attempts.setdefault(record.key, [])
        if record.call not in known:
            known.append(record.call)
    calls = []
    for key, ids in attempts.items():
        latest = max(ids)
        calls.append(Call(key, latest, len(ids), starts.get((key, latest)), ends.get((key, latest))))
    return sorted(calls, key=lambda call: min(attempts[call.key]))


def encode_args(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bytes:
    """once()'s args record, {"args": [...], "kwargs": {...}}, kwargs sorted so equal calls give equal bytes.

    Built from the two halves so that an error names args[1][...] or kwargs["x"], not a path inside a wrapper.
    """
    positional = encode_value(list(args), "args")
    named = encode_value(dict(sorted(kwargs.items())), "kwargs")
    return capped(b"\x82" + msgpack.packb("args") + positional + msgpack.packb("kwargs") + named, "args")  # \x82: a map of 2


def capped(data: bytes, what: str) -> bytes:
    if len(data) > MAX_VALUE:
        raise SerializationError(
            f"{what} take {len(data)} bytes encoded, over the journal's {MAX_VALUE >> 20} MiB limit: "
            "store large data as an artifact (run.commit(..., artifacts=...)) and journal its name"
        )
    return data


def name_of(fn: Callable[..., Any]) -> str:
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or type(fn).__qualname__  # a partial has neither
    return clean(str(name), MAX_KEY)


def message_of(exc: BaseException) -> str:
    try:
        text = str(exc)
    except Exception:  # a broken __str__ must not stop the error from being recorded
        text = f"<{type(exc).__qualname__} whose str() failed>"
    return clean(text)


def clean(text: str, limit: int = MAX_MESSAGE) -> str:
    # hazard: a lone surrogate (from a bytes path, say) cannot be packed as UTF-8
    return text[:limit].encode("utf-8", "backslashreplace").decode("utf-8")[:limit]


def describe_error(error: dict[str, str] | None) -> str:
    return "" if error is None else f"{error['type']}: {error['message']}"
