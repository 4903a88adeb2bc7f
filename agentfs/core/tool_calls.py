"""Journaled calls as context managers: `with run.tool_call(...) as call:` and its async twin."""

from __future__ import annotations

from types import TracebackType
from typing import TYPE_CHECKING, Any

from ..format.journal import Record
from .calls import Call

if TYPE_CHECKING:
    from .journal import Journal  # the journal builds these: typing only


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
        self._take(claimed, claimed.result if isinstance(claimed, Call) else None)
        return self

    def _take(self, claimed: Call | Record, recorded: Any) -> None:
        if isinstance(claimed, Call):
            self.result = recorded
            self.done = True
        else:
            self._start = claimed

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None) -> None:
        start, self._start = self._start, None
        if start is None:
            return
        if exc is None:
            self.journal._succeed(start, self.result)
        elif isinstance(exc, Exception):
            self.journal._fail(start, exc)


class AsyncToolCall:
    """`async with run.atool_call(name, args, key=k) as call:` a ToolCall whose journal reads and writes
    run off the event loop. `call` is the ToolCall: `if not call.done: call.result = await ...`.

    Leaving the block by cancellation records nothing, like a KeyboardInterrupt: the call stays in
    flight, since the body may have had its effect. Cancelled on entry while the start is being
    recorded, the body never runs and the start is ended as an error (see Journal.aonce).
    """

    def __init__(self, call: ToolCall) -> None:
        self.call = call

    def __repr__(self) -> str:
        return f"<agentfs.AsyncToolCall {self.call.name!r} key={self.call.key!r}>"

    async def __aenter__(self) -> ToolCall:
        call = self.call
        claimed, recorded = await call.journal._aclaim(call.key, call.name, lambda: call._args)
        call._take(claimed, recorded)
        return call

    async def __aexit__(self, kind: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None) -> None:
        await self.call.journal.store.offload(self.call.__exit__, kind, exc, traceback)
