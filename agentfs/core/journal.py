"""The tool-call journal: an append-only, durable record of a run's tool calls, synced like its log.

runs/<run>/journal/<id> holds one immutable record per event: a call's start, then its ok or error end.

"AFJ" | version (1 byte) | sha256(body) (32 bytes) | body, body = a msgpack map (see Record.to_bytes)

Each record is published whole (temp file, fsync, link) before the call that wrote it returns, so a
crash leaves no torn record, only a temp file in tmp/. The checksum still catches damage: a damaged
record is skipped, logged and listed in `Journal.damaged`, never misread.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import functools
import hashlib
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

import msgpack

from ..engine.locks import EXCLUSIVE, flock
from ..engine.repository import Repository
from ..errors import Conflict, FormatError, InFlight, IntegrityError, NotFound, SerializationError
from ..format.journal import ERROR, MAX_KEY, OK, START, Record, check_key, decode_record, utc
from ..format.keys import JOURNAL
from ..fsutil import write_atomic
from ..ids import id_time_ns, new_id
from ..names import ID
from ..serialization import encode_value

if TYPE_CHECKING:
    from .run import Run

MAX_MESSAGE = 4096
MAX_VALUE = 16 << 20  # an encoded args or result; remotes cap a record at 64 MiB
IN_FLIGHT = "in_flight"
ABANDONED = "agentfs.Abandoned"  # the error type abandon() records

log = logging.getLogger("agentfs.journal")
T = TypeVar("T")


def journal_dir(store: Repository, run: str) -> Path:
    return store.record_dir(run, JOURNAL)


def local_journal_records(store: Repository) -> Iterator[tuple[str, str]]:
    """(run, id) of every record file in the store."""
    return store.local_records(JOURNAL)


def install_record(store: Repository, run: str, record_id: str, data: bytes) -> bool:
    """Add a record decode_record accepted (from a remote); records are never replaced."""
    return write_atomic(store.tmp_dir, journal_dir(store, run) / record_id, data, sync=store.sync_writes)


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


class _Cache:
    """What this process has read of one run's journal. Records are immutable, so each is decoded once."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.records: dict[str, Record] = {}
        self.by_key: dict[str, dict[str, Record]] = {}  # key -> its records by id: once() looks up one key
        self.damaged: dict[str, str] = {}  # id -> why it was skipped
        self.other: set[str] = set()  # names in journal/ that are no record (directories of nested runs)
        self.last_id: str | None = None  # the greatest id this process wrote or read: new ids go after it

    def add(self, record: Record) -> None:
        self.records[record.id] = record
        self.by_key.setdefault(record.key, {})[record.id] = record

    def drop(self, record_id: str) -> None:
        record = self.records.pop(record_id, None)
        if record is not None:
            self.by_key[record.key].pop(record_id, None)
        self.damaged.pop(record_id, None)


_caches: weakref.WeakKeyDictionary[Repository, dict[str, _Cache]] = weakref.WeakKeyDictionary()
_caches_lock = threading.Lock()


def _cache_of(store: Repository, run: str) -> _Cache:
    with _caches_lock:
        return _caches.setdefault(store, {}).setdefault(run, _Cache())


class Journal:
    """The tool-call journal of one run.

    `once` and `tool_call` hold the run's journal lock only while they read the journal, decide and
    record the start: the call itself runs unlocked. With a store opened with `remote=`, reading the
    journal also fetches the records the remote holds (a remote error is raised, not ignored: the
    record of a call made on another machine may be there).
    """

    def __init__(self, run: Run) -> None:
        self.run = run
        self.store = run.store
        self.dir = journal_dir(run.store, run.name)
        self.lock_path = self.store.lock_path(run.name).with_suffix(".journal.lock")
        self._cache = _cache_of(run.store, run.name)

    def __repr__(self) -> str:
        return f"<agentfs.Journal of run {self.run.name!r}>"

    @property
    def damaged(self) -> list[tuple[str, str]]:
        """(id, why) of each record skipped because it is damaged."""
        with self._cache.lock:
            return sorted(self._cache.damaged.items())

    def records(self) -> list[Record]:
        """Every readable record, in id order."""
        self._refresh()
        with self._cache.lock:
            return [self._cache.records[i] for i in sorted(self._cache.records)]

    def calls(self) -> list[Call]:
        """One Call per key (its latest attempt), in the order of each key's first attempt."""
        return calls_of(self.records())

    def get(self, key: str) -> Call | None:
        check_key(key)
        return self._find(key)

    def in_flight(self) -> list[Call]:
        """Calls that started and recorded no end: each may or may not have happened."""
        return [call for call in self.calls() if call.status == IN_FLIGHT]

    def once(self, key: str, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """`fn(*args, **kwargs)`, journaled under `key`; if `key` already succeeded, its recorded result instead.

        The start is durable before `fn` runs, and the end before `once` returns. If `fn` raises, the
        error is recorded and re-raised, and the next `once(key, ...)` runs `fn` again; a
        KeyboardInterrupt or SystemExit records nothing, leaving the call in flight. A call in flight
        (here or in another process, or left by a crash) raises InFlight: it may or may not have
        happened. The args are recorded: ones that cannot be stored raise SerializationError
        (naming the path, e.g. args[1]["client"]) before anything is written or called; wrap such
        calls in a lambda: `once(key, lambda: fn(client, q))`.
        """
        return self._once(check_key(key), _name_of(fn), encode_args(args, kwargs), fn, args, kwargs)

    def tool_call(self, name: str, args: Any = None, *, key: str | None = None) -> ToolCall:
        """A context manager journaling one call (see ToolCall); without `key`, a fresh one (a pure audit record).

        `with journal.tool_call("search", {"q": q}, key=k) as call:` then `if not call.done: call.result = ...`
        """
        encoded = _capped(encode_value(args, "args"), "args")
        return ToolCall(self, check_key(name, "tool name"), encoded, check_key(key) if key is not None else f"call-{new_id()}")

    def tool(self, name: str | None = None, *, key: Callable[..., str] | None = None) -> Callable[[Callable[..., T]], Callable[..., T]]:
        """Decorator: each call goes through `once`, keyed by `key(*args, **kwargs)`, else by the
        tool name and a hash of the arguments (so the same arguments are the same call)."""

        def decorate(fn: Callable[..., T]) -> Callable[..., T]:
            label = _name_of(fn) if name is None else check_key(name, "tool name")

            @functools.wraps(fn)
            def journaled(*args: Any, **kwargs: Any) -> T:
                encoded = encode_args(args, kwargs)
                call_key = key(*args, **kwargs) if key is not None else f"{label}:{hashlib.sha256(encoded).hexdigest()[:32]}"
                return self._once(check_key(call_key), label, encoded, fn, args, kwargs)

            return journaled

        return decorate

    def abandon(self, key: str, reason: str) -> Call:
        """End the in-flight call `key` as an error of type agentfs.Abandoned, so that the next `once`
        runs it again. For an operator who checked that the call did not happen (or wants it again)."""
        check_key(key)
        with flock(self.lock_path, EXCLUSIVE):
            call = self._find(key)
            if call is None:
                raise NotFound(f"no call with key {key!r} in the journal of run {self.run.name!r}")
            if call.status != IN_FLIGHT:
                raise Conflict(f"{call} is not in flight (its latest attempt ended: {call.status}); only a call in flight can be abandoned")
            end = self._write(ERROR, key, call.name, call.start_id, error={"type": ABANDONED, "message": _clean(reason)})
        return dataclasses.replace(call, end=end)

    # internals

    def _once(self, key: str, name: str, args: bytes, fn: Callable[..., T], positional: tuple[Any, ...], named: dict[str, Any]) -> T:
        claimed = self._claim(key, name, args)
        if isinstance(claimed, Call):
            result: T = claimed.result
            return result
        try:
            value = fn(*positional, **named)
        except Exception as exc:
            self._fail(claimed, exc)
            raise
        self._succeed(claimed, value)
        return value

    def _claim(self, key: str, name: str, args: bytes) -> Call | Record:
        """Under the journal lock: the key's successful Call, or the start record of a new attempt."""
        with flock(self.lock_path, EXCLUSIVE):
            call = self._find(key)
            if call is not None and call.status == OK:
                return call
            if call is not None and call.status == IN_FLIGHT:
                raise in_flight_error(call)
            return self._write(START, key, name, None, args=args)

    def _succeed(self, start: Record, value: Any) -> None:
        try:
            result: bytes | None = _capped(encode_value(value, "result"), "result")
            unrecorded = None
        except SerializationError as exc:
            result, unrecorded = None, _clean(str(exc))
        self._write(OK, start.key, start.name, start.id, result=result, unrecorded=unrecorded)

    def _fail(self, start: Record, exc: Exception) -> None:
        kind = type(exc)
        error = {"type": f"{kind.__module__}.{kind.__qualname__}", "message": _message(exc)}
        self._write(ERROR, start.key, start.name, start.id, error=error)

    def _find(self, key: str) -> Call | None:
        self._refresh()
        with self._cache.lock:
            mine = sorted(self._cache.by_key.get(key, {}).values(), key=lambda record: record.id)
        return next(iter(calls_of(mine)), None)

    def _write(self, kind: str, key: str, name: str, call: str | None, **payload: Any) -> Record:
        """Durably publish a new record; its id follows every id this process has written or read."""
        cache = self._cache
        while True:
            with cache.lock:
                record_id = new_id(after=cache.last_id)
                cache.last_id = record_id
            record = Record(self.run.name, record_id, kind, key, call or record_id, name, time.time_ns(), self.store.writer(), **payload)
            if write_atomic(self.store.tmp_dir, self.dir / record_id, record.to_bytes(), sync=self.store.sync_writes):
                break
            # hazard: write_atomic never replaces a record; a name taken by another process (80 random bits: all but
            # impossible) just means taking another id
        with cache.lock:
            cache.add(record)
        return record

    def _refresh(self) -> None:
        """Decode the records this process has not read yet (fetching, with a remote, those only it holds)."""
        cache = self._cache
        try:
            names = set(os.listdir(self.dir))
        except FileNotFoundError:
            names = set()
        with cache.lock:
            unknown = names - cache.records.keys() - cache.damaged.keys() - cache.other
        for name in unknown:  # the directories of runs named <run>/journal/... may sit here too
            if not (ID.fullmatch(name) and (self.dir / name).is_file()):
                with cache.lock:
                    cache.other.add(name)
        local = names - cache.other
        source = self.store.source
        remote: set[str] = set()
        if source is not None:
            # records deleted here stay on the remote until its gc: never fetch them back
            retired = {i for record in self.store.retirements(self.run.name) for i in record.journal}
            remote = {i for i in source.list_journal(self.run.name) if ID.fullmatch(i)} - local - retired
        with cache.lock:
            for gone in (cache.records.keys() | cache.damaged.keys()) - local - remote:  # the run was deleted
                cache.drop(gone)
            for record_id in sorted(local - cache.records.keys() - cache.damaged.keys()):
                path = self.dir / record_id
                try:
                    data = path.read_bytes()
                except FileNotFoundError:  # deleted since it was listed
                    continue
                self._decode(data, record_id, f"{self.run.name}/{record_id} ({path})")
            for record_id in sorted(remote - cache.records.keys() - cache.damaged.keys()):
                assert source is not None  # remote is empty without a source
                fetched = source.fetch_journal(self.run.name, record_id)
                if fetched is not None and self._decode(fetched, record_id, f"{self.run.name}/{record_id} (remote)"):
                    install_record(self.store, self.run.name, record_id, fetched)
            if cache.records:
                cache.last_id = max(filter(None, [cache.last_id, max(cache.records)]))

    def _decode(self, data: bytes, record_id: str, where: str) -> bool:
        """Cache the record in `data`, or list it as damaged (logged once); caller holds the cache lock."""
        try:
            self._cache.add(decode_record(data, self.run.name, record_id, where))
        except (IntegrityError, FormatError) as exc:
            self._cache.damaged[record_id] = str(exc)
            log.warning("skipping a damaged journal record: %s", exc)
            return False
        return True


class ToolCall:
    """One journaled call as a context manager (see Journal.tool_call).

    If the key already succeeded, `done` is True, `result` holds the recorded result and nothing is
    recorded. Otherwise the body sets `result`; leaving the block records it, or the exception
    that left it (which propagates). A KeyboardInterrupt or SystemExit records nothing, leaving
    the call in flight: it may or may not have happened.
    """

    def __init__(self, journal: Journal, name: str, args: bytes, key: str) -> None:
        self.journal = journal
        self.name = name
        self.key = key
        self.done = False
        self.result: Any = None
        self._args = args
        self._start: Record | None = None

    def __repr__(self) -> str:
        return f"<agentfs.ToolCall {self.name!r} key={self.key!r} done={self.done}>"

    def __enter__(self) -> ToolCall:
        claimed = self.journal._claim(self.key, self.name, self._args)
        if isinstance(claimed, Call):
            self.result = claimed.result
            self.done = True
        else:
            self._start = claimed
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None) -> None:
        start, self._start = self._start, None
        if start is None:
            return
        if exc is None:
            self.journal._succeed(start, self.result)
        elif isinstance(exc, Exception):
            self.journal._fail(start, exc)


def encode_args(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bytes:
    """once()'s args record, {"args": [...], "kwargs": {...}}, kwargs sorted so equal calls give equal bytes.

    Built from the two halves so that an error names args[1][...] or kwargs["x"], not a path inside a wrapper.
    """
    positional = encode_value(list(args), "args")
    named = encode_value(dict(sorted(kwargs.items())), "kwargs")
    return _capped(b"\x82" + msgpack.packb("args") + positional + msgpack.packb("kwargs") + named, "args")  # \x82: a map of 2


def _capped(data: bytes, what: str) -> bytes:
    if len(data) > MAX_VALUE:
        raise SerializationError(
            f"{what} take {len(data)} bytes encoded, over the journal's {MAX_VALUE >> 20} MiB limit: "
            "store large data as an artifact (run.commit(..., artifacts=...)) and journal its name"
        )
    return data


def _name_of(fn: Callable[..., Any]) -> str:
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or type(fn).__qualname__  # a partial has neither
    return _clean(str(name), MAX_KEY)


def _message(exc: BaseException) -> str:
    try:
        text = str(exc)
    except Exception:  # a broken __str__ must not stop the error from being recorded
        text = f"<{type(exc).__qualname__} whose str() failed>"
    return _clean(text)


def _clean(text: str, limit: int = MAX_MESSAGE) -> str:
    # hazard: a lone surrogate (from a bytes path, say) cannot be packed as UTF-8
    return text[:limit].encode("utf-8", "backslashreplace").decode("utf-8")[:limit]


def describe_error(error: dict[str, str] | None) -> str:
    return "" if error is None else f"{error['type']}: {error['message']}"
