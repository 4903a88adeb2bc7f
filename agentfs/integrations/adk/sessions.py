"""AgentFSSessionService: Google ADK's `BaseSessionService` over agentfs runs (see layout.py).

- `append_event` is one durable checkpoint of the session's run, committed with `parent=` the head it
  read. ADK's stale-session check is kept: a session object older than the stored session (another
  writer appended since it was read) raises `StaleSessionError`, as ADK's SQLite service does.
- `app:` and `user:` state deltas go to the app's and the user's state runs (one checkpoint each)
  before the event's checkpoint; `temp:` state never reaches the store. Hazard: a crash between the two
  leaves the scoped values set without the event; the deltas are values, not increments, so the
  invocation that runs again sets the same values (tests/integrations/test_adk.py, the SIGKILL test).
- What ADK lacks: `fork_session` at an event (the fork borrows the checkpoint that ended with that
  event: nothing is copied), and `once`, which runs a tool's side effect at most once per call id in
  the session's journal, so an invocation that runs again after a crash gets the recorded result.
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, Literal, NamedTuple, TypeVar

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
from ..run_names import open_or_use
from .layout import EVENTS, PREFIX, STATE, app_state_run, session_run, sessions_root, user_state_run

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
        # the last session head this service committed: the next append to it extends these events instead of
        # decoding them again. Hazard: never handed out (get_session validates its own copies of the events).
        self._written = _Written("", "", [], frozenset(), {}, 0.0)

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
        await self.store.to_thread(self.run(app_name, user_id, session_id.strip()).delete)

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
            run.commit({EVENTS: [], STATE: deltas["session"]}, metadata=_metadata(app_name, user_id, session_id, 0, now, None), parent=None)
        except agentfs.Conflict:
            raise AlreadyExistsError(f"Session with id {session_id} already exists.") from None
        return self._merged(Session(app_name=app_name, user_id=user_id, id=session_id, state=deltas["session"], last_update_time=now))

    def _get(self, app_name: str, user_id: str, session_id: str, config: GetSessionConfig | None) -> Session | None:
        head = self.run(app_name, user_id, session_id).latest()
        if head is None:
            return None
        stored_events, stored_state = _stored(head)
        events = [Event.model_validate(event) for event in stored_events]
        if config is not None and config.num_recent_events is not None:
            events = events[-config.num_recent_events :] if config.num_recent_events else []
        if config is not None and config.after_timestamp is not None:
            after = config.after_timestamp
            kept = len(events)
            while kept > 0 and events[kept - 1].timestamp >= after:
                kept -= 1
            events = events[kept:]
        session = Session(
            app_name=app_name,
            user_id=user_id,
            id=session_id,
            state=stored_state,
            events=events,
            last_update_time=head.metadata["last_update_time"],
        )
        return self._merged(session)

    def _list(self, app_name: str, user_id: str | None) -> list[Session]:
        root = sessions_root(self.prefix, app_name, user_id)
        sessions = []
        for name in self.store.runs():
            head = self.store.run(name).latest() if name.startswith(root) else None
            if head is None or head.metadata.get("app_name") != app_name:
                continue
            meta = head.metadata
            session = Session(
                app_name=app_name,
                user_id=meta["user_id"],
                id=meta["session_id"],
                state=head.value(STATE),
                last_update_time=meta["last_update_time"],
            )
            sessions.append(self._merged(session))
        return sorted(sessions, key=lambda s: (s.last_update_time, s.user_id, s.id))

    def _append(self, session: Session, event: Event) -> bool:
        """Commit the event (False if the session already holds it); StaleSessionError if `session` is behind."""
        run = self.run(session.app_name, session.user_id, session.id)
        deltas = _session_util.extract_state_delta(event.actions.state_delta if event.actions else {})
        scoped_done = False
        while True:
            head = self._head(run)
            if head is None:
                raise SessionNotFoundError(f"Session {session.id} not found.")
            if head.updated > session.last_update_time:
                raise StaleSessionError(
                    f"session {session.id!r} of app {session.app_name!r}: stored at {head.updated}, "
                    f"this copy at {session.last_update_time}; get_session again (a stale session)"
                )
            if event.id in head.event_ids:
                return False  # appended already (as ADK's in-memory service, a repeat is ignored)
            if not scoped_done:
                self._update_scoped(session.app_name, session.user_id, deltas)
                scoped_done = True
            dumped = event.model_dump(mode="json", exclude_none=True)
            events = [*head.events, dumped]
            state = {**head.state, **deltas["session"]}
            metadata = _metadata(session.app_name, session.user_id, session.id, len(events), event.timestamp, event.id)
            try:
                # the head's events with this one appended: the commit encodes and stores the new event only
                checkpoint = run.commit({EVENTS: agentfs.Extend([dumped]), STATE: state}, metadata=metadata, parent=head.id)
            except agentfs.Conflict:
                continue  # another writer appended meanwhile: its time decides whether this copy is stale
            self._written = _Written(run.name, checkpoint.id, events, head.event_ids | {event.id}, state, event.timestamp)
            return True

    def _head(self, run: agentfs.Run) -> _Written | None:
        """The session's head, without decoding its events when this service committed it."""
        head_id = run.head_id()
        written = self._written  # one read: another worker thread may replace it
        if head_id is None or (written.run, written.id) == (run.name, head_id):
            return None if head_id is None else written
        head = run.get(head_id)
        events, state = _stored(head)
        event_ids = frozenset(stored_event.get("id") for stored_event in events)
        return _Written(run.name, head_id, events, event_ids, state, head.metadata["last_update_time"])

    def _fork(self, app_name: str, user_id: str, session_id: str, fork_id: str, at_event_id: str | None) -> Session:
        source = self.run(app_name, user_id, session_id)
        head = source.latest()
        if head is None:
            raise SessionNotFoundError(f"Session {session_id} not found.")
        base = head
        if at_event_id is not None:
            found = next((cp for cp in source.history() if cp.metadata.get("last_event_id") == at_event_id), None)
            if found is None:
                raise SessionNotFoundError(f"session {session_id!r} has no event {at_event_id!r} to fork at")
            base = found
        target = self.run(app_name, user_id, fork_id)
        try:
            if target.head_id() is not None:
                raise agentfs.Conflict(target.name)
            fork = source.fork(base.id, target.name)
        except agentfs.Conflict:
            raise AlreadyExistsError(f"Session with id {fork_id} already exists.") from None
        meta = base.metadata
        # the fork starts with the source's metadata: one commit names the new session (its state: the base's)
        stored_events, stored_state = _stored(base)
        stored = {EVENTS: stored_events, STATE: stored_state}
        fork.commit(
            stored,
            metadata=_metadata(app_name, user_id, fork_id, meta["events"], meta["last_update_time"], meta["last_event_id"]),
            parent=fork.head_id(),
        )
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


def _stored(checkpoint: agentfs.Checkpoint) -> tuple[list[Any], dict[str, Any]]:
    """(events, session state) of a session checkpoint; anything else in the run is refused by name."""
    state = checkpoint.state
    events = state.get(EVENTS) if isinstance(state, dict) else None
    scoped = state.get(STATE) if isinstance(state, dict) else None
    if not (isinstance(events, list) and isinstance(scoped, dict) and isinstance(checkpoint.metadata.get("last_update_time"), float | int)):
        raise agentfs.FormatError(f"checkpoint {checkpoint.id} of run {checkpoint.run!r} is not a Google ADK session checkpoint")
    return events, scoped


class _Written(NamedTuple):
    run: str
    id: str
    events: list[Any]
    event_ids: frozenset[Any]  # the events' ids: a repeated event is found without a scan of the events
    state: dict[str, Any]
    updated: float  # the head's last_update_time


def _merge_with(delta: dict[str, Any]) -> Callable[[Any], dict[str, Any]]:
    return lambda state: {**(state or {}), **delta}


def _metadata(app_name: str, user_id: str, session_id: str, events: int, updated: float, last_event: str | None) -> dict[str, Any]:
    return {
        "app_name": app_name,
        "user_id": user_id,
        "session_id": session_id,
        EVENTS: events,
        "last_update_time": updated,
        "last_event_id": last_event,
    }
