"""The tool-call journal: an append-only, durable record of a run's tool calls, synced like its log.

runs/<run>/journal/<id> holds one immutable record per event: a call's start, then its ok or error end.

"AFJ" | version (1 byte) | sha256(body) (32 bytes) | body, body = a msgpack map (see Record.to_bytes)

Each record is appended whole and durably (EngineAPI.append_record) before the call that wrote it
returns, so a crash leaves no torn record. The checksum still catches damage: a damaged
record is skipped, logged and listed in `Journal.damaged`, never misread.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import logging
import threading
import time
import weakref
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from ..errors import Conflict, FormatError, IntegrityError, NotFound, SerializationError
from ..format.journal import ERROR, OK, START, Record, check_key, decode_record
from ..format.keys import JOURNAL_RECORDS
from ..ids import new_id
from ..names import ID
from ..serialization import encode_value
from .calls import ABANDONED, CANCELLED, IN_FLIGHT, Call, calls_of, capped, clean, encode_args, in_flight_error, message_of, name_of
from .engine_api import EngineAPI
from .tool_calls import AsyncToolCall, ToolCall

if TYPE_CHECKING:
    from .run import Run

log = logging.getLogger("agentfs.journal")
T = TypeVar("T")


class _Cache:
    """What this process has read of one run's journal. Records are immutable, so each is decoded once."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.records: dict[str, Record] = {}
        self.by_key: dict[str, dict[str, Record]] = {}  # key -> its records by id: once() looks up one key
        self.damaged: dict[str, str] = {}  # id -> why it was skipped
        self.last_id: str | None = None  # the greatest id this process wrote or read: new ids go after it
        self.synced: set[str] = set()  # start ids of successful calls this process made durable (see _make_durable)

    def add(self, record: Record) -> None:
        self.records[record.id] = record
        self.by_key.setdefault(record.key, {})[record.id] = record

    def drop(self, record_id: str) -> None:
        record = self.records.pop(record_id, None)
        if record is not None:
            self.by_key[record.key].pop(record_id, None)
        self.damaged.pop(record_id, None)


_caches: weakref.WeakKeyDictionary[EngineAPI, dict[str, _Cache]] = weakref.WeakKeyDictionary()
_caches_lock = threading.Lock()


def _cache_of(store: EngineAPI, run: str) -> _Cache:
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
        return self._once(check_key(key), name_of(fn), encode_args(args, kwargs), fn, args, kwargs)

    def tool_call(self, name: str, args: Any = None, *, key: str | None = None) -> ToolCall:
        """A context manager journaling one call (see ToolCall); without `key`, a fresh one (a pure audit record).

        `with journal.tool_call("search", {"q": q}, key=k) as call:` then `if not call.done: call.result = ...`
        """
        encoded = capped(encode_value(args, "args"), "args")
        return ToolCall(self, check_key(name, "tool name"), encoded, check_key(key) if key is not None else f"call-{new_id()}")

    def tool(self, name: str | None = None, *, key: Callable[..., str] | None = None) -> Callable[[Callable[..., T]], Callable[..., T]]:
        """Decorator: each call goes through `once`, keyed by `key(*args, **kwargs)`, else by the
        tool name and a hash of the arguments (so the same arguments are the same call)."""

        def decorate(fn: Callable[..., T]) -> Callable[..., T]:
            label = name_of(fn) if name is None else check_key(name, "tool name")

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
        with self.store.journal_lock(self.run.name):
            call = self._find(key)
            if call is None:
                raise NotFound(f"no call with key {key!r} in the journal of run {self.run.name!r}")
            if call.status != IN_FLIGHT:
                raise Conflict(f"{call} is not in flight (its latest attempt ended: {call.status}); only a call in flight can be abandoned")
            end = self._write(ERROR, key, call.name, call.start_id, error={"type": ABANDONED, "message": clean(reason)})
        return dataclasses.replace(call, end=end)

    # async twins (aio.py): journal reads and writes run off the event loop, the coroutine on it

    async def aonce(self, key: str, coro_fn: Callable[..., Awaitable[T]], /, *args: Any, **kwargs: Any) -> T:
        """`await coro_fn(*args, **kwargs)`, journaled under `key` exactly as once() journals a call (the same
        records: once and aonce see each other's calls); if `key` already succeeded, its recorded result.

        Cancellation: cancelled while the coroutine runs, the call stays in flight, as after a
        KeyboardInterrupt (which also records nothing): the coroutine may have had its effect (a request
        sent, its answer lost). Cancelled while its start is being recorded, the coroutine is never
        called: the start is ended as an error of type asyncio.CancelledError, so the next aonce runs
        it. Cancelled while its end is being recorded, the end is still recorded.
        """
        return await self._aonce(check_key(key), name_of(coro_fn), lambda: encode_args(args, kwargs), coro_fn, args, kwargs)

    def atool_call(self, name: str, args: Any = None, *, key: str | None = None) -> AsyncToolCall:
        """tool_call() for async code: `async with journal.atool_call(...) as call:` (see AsyncToolCall)."""
        return AsyncToolCall(self.tool_call(name, args, key=key))

    def atool(
        self, name: str | None = None, *, key: Callable[..., str] | None = None
    ) -> Callable[[Callable[..., Awaitable[T]]], Callable[..., Awaitable[T]]]:
        """tool() for coroutine functions: each call goes through `aonce`, keyed the same way."""

        def decorate(coro_fn: Callable[..., Awaitable[T]]) -> Callable[..., Awaitable[T]]:
            label = name_of(coro_fn) if name is None else check_key(name, "tool name")

            @functools.wraps(coro_fn)
            async def journaled(*args: Any, **kwargs: Any) -> T:
                encoded = await self.store.offload(encode_args, args, kwargs)
                call_key = key(*args, **kwargs) if key is not None else f"{label}:{hashlib.sha256(encoded).hexdigest()[:32]}"
                return await self._aonce(check_key(call_key), label, lambda: encoded, coro_fn, args, kwargs)

            return journaled

        return decorate

    async def arecords(self) -> list[Record]:
        return await self.store.offload(self.records)

    async def acalls(self) -> list[Call]:
        return await self.store.offload(self.calls)

    async def aget(self, key: str) -> Call | None:
        return await self.store.offload(self.get, key)

    async def ain_flight(self) -> list[Call]:
        return await self.store.offload(self.in_flight)

    async def aabandon(self, key: str, reason: str) -> Call:
        return await self.store.offload(self.abandon, key, reason)

    async def _aonce(
        self,
        key: str,
        name: str,
        encode: Callable[[], bytes],
        coro_fn: Callable[..., Awaitable[T]],
        positional: tuple[Any, ...],
        named: dict[str, Any],
    ) -> T:
        claimed, recorded = await self._aclaim(key, name, encode)
        if isinstance(claimed, Call):
            result: T = recorded
            return result
        try:
            value = await coro_fn(*positional, **named)
        except Exception as exc:  # CancelledError and KeyboardInterrupt are not: they leave the call in flight
            await self.store.offload(self._fail, claimed, exc)
            raise
        await self.store.offload(self._succeed, claimed, value)
        return value

    async def _aclaim(self, key: str, name: str, encode: Callable[[], bytes]) -> tuple[Call | Record, Any]:
        """_claim() off the loop, with the recorded result of a key that succeeded (decoded off the loop too)."""
        claimed = await self.store.offload.call_or_undo(lambda: self._claim(key, name, encode()), self._end_unstarted)
        if isinstance(claimed, Call):
            return claimed, await self.store.offload(lambda: claimed.result)
        return claimed, None

    def _end_unstarted(self, claimed: Call | Record) -> None:
        """End a start recorded for a call whose caller was cancelled before it could run the call."""
        if isinstance(claimed, Record):
            error = {"type": CANCELLED, "message": "cancelled while its start was recorded: never called"}
            self._write(ERROR, claimed.key, claimed.name, claimed.id, error=error)

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
        with self.store.journal_lock(self.run.name):
            call = self._find(key)
            if call is not None and call.status == OK:
                self._make_durable(call)
                return call
            if call is not None and call.status == IN_FLIGHT:
                raise in_flight_error(call)
            return self._write(START, key, name, None, args=args)

    def _make_durable(self, call: Call) -> None:
        """Sync a successful call's records before its result is returned, once per call and process.

        Hazard: another process may have linked them into journal/ and been killed before it fsynced
        the directory (or run with durability="process"): a result returned from them could be undone
        by power loss after the caller acted on it (tests/engine/test_crash_states.py, the restart workload).
        """
        cache = self._cache
        if call.start_id in cache.synced:
            return
        self.store.make_records_durable(self.run.name, JOURNAL_RECORDS, [r.id for r in (call.start, call.end) if r is not None])
        with cache.lock:
            cache.synced.add(call.start_id)

    def _succeed(self, start: Record, value: Any) -> None:
        try:
            result: bytes | None = capped(encode_value(value, "result"), "result")
            unrecorded = None
        except SerializationError as exc:
            result, unrecorded = None, clean(str(exc))
        self._write(OK, start.key, start.name, start.id, result=result, unrecorded=unrecorded)

    def _fail(self, start: Record, exc: Exception) -> None:
        kind = type(exc)
        error = {"type": f"{kind.__module__}.{kind.__qualname__}", "message": message_of(exc)}
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
            if self.store.append_record(self.run.name, JOURNAL_RECORDS, record_id, record.to_bytes()):
                break
            # hazard: append_record never replaces a record; a name taken by another process (80 random bits: all but
            # impossible) just means taking another id
        with cache.lock:
            cache.add(record)
        return record

    def _refresh(self) -> None:
        """Decode the records this process has not read yet (fetching, with a remote, those only it holds)."""
        cache = self._cache
        run = self.run.name
        with cache.lock:
            known = cache.records.keys() | cache.damaged.keys()
        local = self.store.poll_record_ids(run, JOURNAL_RECORDS, known)  # not the directories of runs named <run>/journal/...
        source = self.store.source
        remote: set[str] = set()
        if source is not None:
            # records deleted here stay on the remote until its gc: never fetch them back
            retired = {i for record in self.store.retirements(run) for i in record.journal}
            remote = {i for i in source.list_journal(run) if ID.fullmatch(i)} - local - retired
        with cache.lock:
            for gone in (cache.records.keys() | cache.damaged.keys()) - local - remote:  # the run was deleted
                cache.drop(gone)
            for record_id in sorted(local - cache.records.keys() - cache.damaged.keys()):
                data = self.store.read_record(run, JOURNAL_RECORDS, record_id)
                if data is not None:  # else deleted since it was listed
                    self._decode(data, record_id, f"{run}/{record_id} ({self.store.where_stored(run, JOURNAL_RECORDS, record_id)})")
            for record_id in sorted(remote - cache.records.keys() - cache.damaged.keys()):
                assert source is not None  # remote is empty without a source
                fetched = source.fetch_journal(run, record_id)
                if fetched is not None and self._decode(fetched, record_id, f"{run}/{record_id} (remote)"):
                    self.store.append_record(run, JOURNAL_RECORDS, record_id, fetched)  # never replaces a record
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
