"""AgentFSSessionService: Google ADK's `BaseSessionService` over agentfs runs (see layout.py).

- `append_event` is one durable checkpoint of the session's run holding that event, committed with
  `parent=` the head it read; the session's events are read back by one sweep of the run (events.py).
  ADK's stale-session check is kept: a session object older than the stored session (another
  writer appended since it was read) raises `StaleSessionError`, as ADK's SQLite service does.
- `app:` and `user:` state deltas go to the app's and the user's state runs (one checkpoint each)
  before the event's checkpoint; `temp:` state never reaches the store. Hazard: a crash between the two
  leaves the scoped values set without the event; the deltas are values, not increments, so the
  invocation that runs again sets the same values (tests/integrations/test_adk.py, the SIGKILL test).
- What ADK lacks: `fork_session` at an event (the fork borrows the checkpoint that ended with that
  event, then commits the events up to it as one list: a fork reads nothing of its source, which may be
  deleted), and `once`, which runs a tool's side effect at most once per call id in
  the session's journal, so an invocation that runs again after a crash gets the recorded result.
"""

from __future__ import annotations

import copy
import os
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, Literal, TypeVar

from google.adk.errors._stale_session_error import StaleSessionError
from google.adk.errors.already_exists_error import AlreadyExistsError
from google.adk.errors.session_not_found_error import SessionNotFoundError
from google.adk.events.event import Event
from google.adk.sessions import _session_util
from google.adk.sessions.base_session_service import BaseSessionService, GetSessionConfig, ListSessionsResponse
from google.adk.sessions.session import Session
from google.adk.sessions.state import State
from google.adk.tools.tool_context import ToolContext

import agentfs

from ...api import EncryptionArg
from ..run_names import open_or_use, plain_id, segment
from .events import MAX_FORK_HOPS, SessionLogs, read_log, single_event
from .layout import EVENT, EVENTS, PREFIX, STATE, app_state_run, session_run, sessions_root, user_state_run

T = TypeVar("T")


class AgentFSSessionService(BaseSessionService):
    """ADK sessions kept as agentfs checkpoints; `store` is an `agentfs.Store` or a path (opened with
    `remote`, `storage_options`, `durability` and `encryption` as in `agentfs.open`)."""

    def __init__(
        self,
        store: agentfs.Store | str | os.PathLike[str] = ".agentfs",
        *,
        prefix: str = PREFIX,
        remote: str | None = None,
        storage_options: dict[str, Any] | None = None,
        durability: Literal["power", "process"] | None = None,
        encryption: EncryptionArg = None,
    ) -> None:
        self.store, self._owns_store = open_or_use(
            store, "AgentFSSessionService", remote=remote, storage_options=storage_options, durability=durability, encryption=encryption
        )
        self.prefix = prefix
        self._logs = SessionLogs()

    async def close(self) -> None:
        """Close the store if this service opened it (async, as ADK's database services' `close`)."""
        if self._owns_store:
            self.store.close()

    def run(self, app_name: str, user_id: str, session_id: str) -> agentfs.Run:
        """The agentfs run of a session: its history, forks, journal and sync work as for any run."""
        return self.store.run(session_run(self.prefix, app_name, user_id, session_id))

    async def create_session(
        self, *, app_name: str, user_id: str, state: dict[str, Any] | None = None, session_id: str | None = None
    ) -> Session:
        return await self.store.to_thread(self._create, app_name, user_id, state or {}, (session_id or "").strip() or str(uuid.uuid4()))

    async def get_session(self, *, app_name: str, user_id: str, session_id: str, config: GetSessionConfig | None = None) -> Session | None:
        return await self.store.to_thread(self._get, app_name, user_id, session_id.strip(), config)

    async def list_sessions(self, *, app_name: str, user_id: str | None = None) -> ListSessionsResponse:
        return ListSessionsResponse(sessions=await self.store.to_thread(self._list, app_name, user_id))

    async def delete_session(self, *, app_name: str, user_id: str, session_id: str) -> None:
        await self.store.to_thread(self._delete, app_name, user_id, session_id.strip())

    async def get_user_state(self, *, app_name: str, user_id: str) -> dict[str, Any]:
        return await self.store.to_thread(self._scoped, user_state_run(self.prefix, app_name, user_id))

    async def append_event(self, session: Session, event: Event) -> Event:
        if event.partial:
            return event
        self._apply_temp_state(session, event)
        event = self._trim_temp_delta_state(event)
        if await self.store.to_thread(self._append, session, event):
            session.last_update_time = event.timestamp
            self._commit_event_to_session(session, event)
        return event

    async def fork_session(
        self, *, app_name: str, user_id: str, session_id: str, new_session_id: str | None = None, at_event_id: str | None = None
    ) -> Session:
        """A new session of the same user holding the events up to and with `at_event_id` (all by default)
        and the session state as it was then; the two sessions diverge after it."""
        fork_id = (new_session_id or "").strip() or str(uuid.uuid4())
        return await self.store.to_thread(self._fork, app_name, user_id, session_id, fork_id, at_event_id)

    def once(self, tool_context: ToolContext, fn: Callable[..., T], /, *args: Any, key: str | None = None, **kwargs: Any) -> T:
        """Inside a tool: `fn(*args, **kwargs)` at most once per key in the session's journal (default key: the
        model's function call id); after a crash, the recorded result instead."""
        return self._session_run(tool_context).once(self._call_key(tool_context, key), fn, *args, **kwargs)

    async def aonce(
        self, tool_context: ToolContext, coro_fn: Callable[..., Awaitable[T]], /, *args: Any, key: str | None = None, **kwargs: Any
    ) -> T:
        """`once` for an async side effect."""
        return await self._session_run(tool_context).aonce(self._call_key(tool_context, key), coro_fn, *args, **kwargs)

    # blocking work, run on the store's offload pool

    def _session_run(self, tool_context: ToolContext) -> agentfs.Run:
        session = tool_context.session
        return self.run(session.app_name, session.user_id, session.id)

    @staticmethod
    def _call_key(tool_context: ToolContext, key: str | None) -> str:
        if key is not None:
            return key
        if not tool_context.function_call_id:
            raise ValueError("once() needs a key when the tool call has no function call id")
        return f"call/{tool_context.function_call_id}"

    def _create(self, app_name: str, user_id: str, state: dict[str, Any], session_id: str) -> Session:
        run = self.run(app_name, user_id, session_id)
        if run.head_id() is not None:
            raise AlreadyExistsError(f"Session with id {session_id} already exists.")
        deltas = _session_util.extract_state_delta(state)
        self._update_scoped(app_name, user_id, deltas)
        now = time.time()
        try:
            checkpoint = run.commit({EVENTS: [], STATE: deltas["session"]}, metadata=_metadata(user_id, session_id, now), parent=None)
        except agentfs.Conflict:
            raise AlreadyExistsError(f"Session with id {session_id} already exists.") from None
        self._logs.started(run, checkpoint, [], now)
        return self._merged(Session(app_name=app_name, user_id=user_id, id=session_id, state=deltas["session"], last_update_time=now))

    def _get(self, app_name: str, user_id: str, session_id: str, config: GetSessionConfig | None) -> Session | None:
        log = self._logs.current(self.run(app_name, user_id, session_id))
        if log is None:
            return None
        dumped = log.dumped()
        if config is not None and config.num_recent_events is not None:
            dumped = dumped[-config.num_recent_events :] if config.num_recent_events else []
        if config is not None and config.after_timestamp is not None:
            after = config.after_timestamp
            kept = len(dumped)
            while kept > 0 and dumped[kept - 1]["timestamp"] >= after:
                kept -= 1
            dumped = dumped[kept:]
        session = Session(
            app_name=app_name,
            user_id=user_id,
            id=session_id,
            state=copy.deepcopy(log.state),  # the caller's to change
            events=[Event.model_validate(event) for event in copy.deepcopy(dumped)],  # Event shares the values under Any fields
            last_update_time=log.updated,
        )
        return self._merged(session)

    def _list(self, app_name: str, user_id: str | None) -> list[Session]:
        root = sessions_root(self.prefix, app_name, user_id)
        sessions = []
        for name in self.store.runs():
            head = self.store.run(name).latest() if name.startswith(root) else None
            updated = None if head is None else head.metadata.get("last_update_time")
            if head is None or not isinstance(updated, float | int):
                continue
            meta = head.metadata
            segments = name[len(root) :].split("/")
            user = user_id if user_id is not None else meta.get("user_id", plain_id(segments[0]))
            session_id = meta.get("session_id", plain_id(segments[-1]))
            if user is None or session_id is None:
                continue  # a hashed segment without its id: no session this service wrote
            session = Session(app_name=app_name, user_id=user, id=session_id, state=head.value(STATE), last_update_time=updated)
            sessions.append(self._merged(session))
        return sorted(sessions, key=lambda s: (s.last_update_time, s.user_id, s.id))

    def _delete(self, app_name: str, user_id: str, session_id: str) -> None:
        run = self.run(app_name, user_id, session_id)
        run.delete()
        self._logs.forget(run.name)

    def _append(self, session: Session, event: Event) -> bool:
        """Commit the event (False if the session already holds it); StaleSessionError if `session` is behind."""
        run = self.run(session.app_name, session.user_id, session.id)
        deltas = _session_util.extract_state_delta(event.actions.state_delta if event.actions else {})
        scoped_done = False
        while True:
            log = self._logs.current(run)
            if log is None:
                raise SessionNotFoundError(f"Session {session.id} not found.")
            if log.updated > session.last_update_time:
                raise StaleSessionError(
                    f"session {session.id!r} of app {session.app_name!r}: stored at {log.updated}, "
                    f"this copy at {session.last_update_time}; get_session again (a stale session)"
                )
            if log.holds(event.id):
                return False  # appended already (as ADK's in-memory service, a repeat is ignored)
            if not scoped_done:
                self._update_scoped(session.app_name, session.user_id, deltas)
                scoped_done = True
            dumped = event.model_dump(mode="json", exclude_none=True)
            # an unchanged state is the head's value: the commit refers to it where the head stored it
            state = {**log.state, **deltas["session"]}
            metadata = _metadata(session.user_id, session.id, event.timestamp)
            try:
                checkpoint = run.commit({EVENT: dumped, STATE: state}, metadata=metadata, parent=log.head)
            except agentfs.Conflict:
                continue  # another writer appended meanwhile: its time decides whether this copy is stale
            self._logs.committed(run, log, checkpoint, dumped, bool(deltas["session"]), event.timestamp)
            return True

    def _fork(self, app_name: str, user_id: str, session_id: str, fork_id: str, at_event_id: str | None) -> Session:
        source = self.run(app_name, user_id, session_id)
        log = self._logs.current(source)
        if log is None:
            raise SessionNotFoundError(f"Session {session_id} not found.")
        home, base = source, log
        if at_event_id is not None:
            found = _checkpoint_of(source, log.head, at_event_id) if log.holds(at_event_id) else None
            if found is None:
                raise SessionNotFoundError(f"session {session_id!r} has no event {at_event_id!r} to fork at")
            home, base = found[0], read_log(found[0], None, found[1])
        target = self.run(app_name, user_id, fork_id)
        try:
            if target.head_id() is not None:
                raise agentfs.Conflict(target.name)
            fork = home.fork(base.head, target.name)
        except agentfs.Conflict:
            raise AlreadyExistsError(f"Session with id {fork_id} already exists.") from None
        # the fork's own list of the events up to the fork: its events never depend on the source's checkpoints
        events = base.dumped()
        metadata = _metadata(user_id, fork_id, base.updated)
        checkpoint = fork.commit({EVENTS: events, STATE: base.state}, metadata=metadata, parent=fork.head_id())
        self._logs.started(fork, checkpoint, events, base.updated)
        forked = self._get(app_name, user_id, fork_id, None)
        assert forked is not None, "the fork was just committed"
        return forked

    def _scoped(self, run_name: str) -> dict[str, Any]:
        head = self.store.run(run_name).latest()
        return {} if head is None else dict(head.state)

    def _update_scoped(self, app_name: str, user_id: str, deltas: dict[str, dict[str, Any]]) -> None:
        scopes = ((app_state_run(self.prefix, app_name), deltas["app"]), (user_state_run(self.prefix, app_name, user_id), deltas["user"]))
        for run_name, delta in scopes:
            if delta:
                self.store.run(run_name).update(_merge_with(delta))

    def _merged(self, session: Session) -> Session:
        """The session with the app's and the user's state merged in under their prefixes, as ADK's services return it."""
        for key, value in self._scoped(app_state_run(self.prefix, session.app_name)).items():
            session.state[State.APP_PREFIX + key] = value
        for key, value in self._scoped(user_state_run(self.prefix, session.app_name, session.user_id)).items():
            session.state[State.USER_PREFIX + key] = value
        return session


def _checkpoint_of(run: agentfs.Run, head: str, event_id: str) -> tuple[agentfs.Run, str] | None:
    """(run, checkpoint) on the line of `head` that ended with the event (a single event's, or one the earlier layout
    wrote, its id in the metadata), through the checkpoint the run was forked from (at most MAX_FORK_HOPS runs back,
    as read_log follows them); None if there is none."""
    for _hop in range(MAX_FORK_HOPS + 1):
        checkpoints = {checkpoint.id: checkpoint for checkpoint in run.get_many(run.ids())}
        at = checkpoints.get(head)
        source = None
        while at is not None and source is None:
            if at.metadata.get("last_event_id") == event_id or (at.has_value(EVENT) and single_event(at).get("id") == event_id):
                return run, at.id
            source = at.forked_from if at.parent is None else None
            at = None if at.parent is None else checkpoints.get(at.parent)
        if source is None:
            return None
        run, head = agentfs.Run(run.store, source[0]), source[1]
    raise agentfs.FormatError(f"run {run.name!r}: past {MAX_FORK_HOPS} runs in a row that continue another's events; refused")


def _merge_with(delta: dict[str, Any]) -> Callable[[Any], dict[str, Any]]:
    return lambda state: {**(state or {}), **delta}


def _metadata(user_id: str, session_id: str, updated: float) -> dict[str, Any]:
    """A session checkpoint's metadata: its time, and the user and session ids that the run name holds only hashed."""
    metadata: dict[str, Any] = {"last_update_time": updated}
    if plain_id(segment(user_id)) is None:
        metadata["user_id"] = user_id
    if plain_id(segment(session_id)) is None:
        metadata["session_id"] = session_id
    return metadata
