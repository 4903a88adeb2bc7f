"""AgentFSSessionRepository: Strands' `SessionRepository` over agentfs runs (see layout.py).

Give it to Strands' `RepositorySessionManager(session_id=..., session_repository=repository)`:

- every create or update is one durable checkpoint of one run (the session's, the agent's, the agent's
  messages' or the multi-agent's); an update is committed with `parent=` the head it read (an agent's: or
  the one this repository last committed there, not read again), and a writer that lost the race
  reads the new head and applies its change again; a message is appended, so nothing another writer
  committed is lost (test_strands.py, the racing writers and an update after another writer's record);
- answers and errors are those of Strands' `FileSessionManager` (`SessionException` for a session that
  exists or a record that does not, `None` for a missing read; agentfs.testing.strands_repository
  checks it call by call), except that hostile ids (`..`, a path separator) are refused by name
  (layout.InvalidId, a ValueError as Strands raises for a separator);
- what Strands lacks: `once`, which runs a tool's side effect at most once per tool use id in the
  agent's journal, so an agent that resumes a tool call after a crash gets the recorded result.
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Callable
from typing import Any, Literal, TypeVar

from strands.multiagent.base import MultiAgentBase
from strands.session.session_repository import SessionRepository
from strands.types.exceptions import SessionException
from strands.types.session import Session, SessionAgent, SessionMessage, decode_bytes_values
from strands.types.tools import ToolContext

import agentfs

from ..run_names import open_or_use
from .layout import (
    AGENT,
    MESSAGE,
    PREFIX,
    SESSION,
    STATE,
    agent_run,
    as_json,
    messages_run,
    multi_agent_run,
    record_of,
    session_root,
    session_run,
    stored,
)
from .messages import MessageLogs

T = TypeVar("T")


class AgentFSSessionRepository(SessionRepository):
    """Strands sessions kept as agentfs checkpoints; `store` is an `agentfs.Store` or a path (opened with
    `remote`, `storage_options`, `durability` and `encryption` as in `agentfs.open`)."""

    def __init__(
        self,
        store: agentfs.Store | str | os.PathLike[str] = ".agentfs",
        *,
        prefix: str = PREFIX,
        remote: str | None = None,
        storage_options: dict[str, Any] | None = None,
        durability: Literal["power", "process"] | None = None,
        encryption: agentfs.Encryption | str | bool | None = None,
    ) -> None:
        self.store, self._owns_store = open_or_use(
            store, "AgentFSSessionRepository", remote=remote, storage_options=storage_options, durability=durability, encryption=encryption
        )
        self.prefix = prefix
        self._logs = MessageLogs(self.store)
        # agent run -> (the head this process committed or read there, its record's created_at): an update goes after
        # it without reading it again; a head another writer moved meanwhile fails the commit (Conflict), read then
        self._agents: dict[str, tuple[str, Any]] = {}

    def __repr__(self) -> str:
        return f"<AgentFSSessionRepository {self.prefix!r} in {self.store!r}>"

    def __enter__(self) -> AgentFSSessionRepository:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the store if this repository opened it."""
        if self._owns_store:
            self.store.close()

    def run(self, session_id: str, agent_id: str) -> agentfs.Run:
        """The agentfs run of an agent's messages in a session: its history, journal and sync work as for any run."""
        return self.store.run(messages_run(self.prefix, session_id, agent_id))

    def once(
        self, session_id: str, tool_context: ToolContext, fn: Callable[..., T], /, *args: Any, key: str | None = None, **kwargs: Any
    ) -> T:
        """Inside a tool (`@tool(context=True)`): `fn(*args, **kwargs)` at most once per key in the agent's journal
        (default key: the tool use id); after a crash, the recorded result instead."""
        call_key = key if key is not None else f"call/{tool_context.tool_use['toolUseId']}"
        return self.run(session_id, tool_context.agent.agent_id).once(call_key, fn, *args, **kwargs)

    # sessions

    def create_session(self, session: Session, **kwargs: Any) -> Session:
        run = self.store.run(session_run(self.prefix, session.session_id))
        if run.head_id() is not None:
            raise SessionException(f"Session {session.session_id} already exists")
        try:
            run.commit(
                {SESSION: as_json(session.to_dict(), f"session {session.session_id!r}")},
                metadata={"session_id": session.session_id},
                parent=None,
            )
        except agentfs.Conflict:
            raise SessionException(f"Session {session.session_id} already exists") from None
        return session

    def read_session(self, session_id: str, **kwargs: Any) -> Session | None:
        head = self.store.run(session_run(self.prefix, session_id)).latest()
        return None if head is None else Session.from_dict(stored(head, (SESSION,))[SESSION])

    def delete_session(self, session_id: str, **kwargs: Any) -> None:
        """Delete the session with its agents and multi-agents (the session record last: a crash midway leaves a
        session that can be deleted again)."""
        record = session_run(self.prefix, session_id)
        root = session_root(self.prefix, session_id)
        names = [name for name in self.store.runs() if name.startswith(root) and name != record]
        if not names and self.store.run(record).head_id() is None:
            raise SessionException(f"Session {session_id} does not exist")
        for name in [*names, record]:
            self.store.run(name).delete()
            self._logs.forget(name)
            self._agents.pop(name, None)

    # agents and their messages

    def create_agent(self, session_id: str, session_agent: SessionAgent, **kwargs: Any) -> None:
        record = record_of(session_agent, f"agent {session_agent.agent_id!r} of session {session_id!r}")
        metadata = {"session_id": session_id, "agent_id": session_agent.agent_id}
        run_name = agent_run(self.prefix, session_id, session_agent.agent_id)
        checkpoint = self.store.run(run_name).commit({AGENT: record}, metadata=metadata)
        self._agents[run_name] = (checkpoint.id, record["created_at"])

    def read_agent(self, session_id: str, agent_id: str, **kwargs: Any) -> SessionAgent | None:
        head = self.store.run(agent_run(self.prefix, session_id, agent_id)).latest()
        return None if head is None else SessionAgent.from_dict(stored(head, (AGENT,))[AGENT])

    def update_agent(self, session_id: str, session_agent: SessionAgent, **kwargs: Any) -> None:
        run_name = agent_run(self.prefix, session_id, session_agent.agent_id)
        run = self.store.run(run_name)
        metadata = {"session_id": session_id, "agent_id": session_agent.agent_id}
        known = self._agents.get(run_name)
        while True:
            if known is None:
                head = run.latest()
                if head is None:
                    raise SessionException(f"Agent {session_agent.agent_id} in session {session_id} does not exist")
                known = (head.id, stored(head, (AGENT,))[AGENT]["created_at"])
            parent, session_agent.created_at = known  # as Strands' repositories: the creation time is kept
            record = record_of(session_agent, f"agent {session_agent.agent_id!r} of session {session_id!r}")
            try:
                checkpoint = run.commit({AGENT: record}, metadata=metadata, parent=parent)
            except agentfs.Conflict:
                known = None  # another writer moved the head (or deleted the agent): keep the creation time it holds
                continue
            self._agents[run_name] = (checkpoint.id, record["created_at"])
            return

    def create_message(self, session_id: str, agent_id: str, session_message: SessionMessage, **kwargs: Any) -> None:
        message_id = _check_message_id(session_message.message_id)
        record = record_of(session_message, f"message {message_id} of agent {agent_id!r} in session {session_id!r}")
        run_name = messages_run(self.prefix, session_id, agent_id)
        metadata = {"message_id": message_id}  # the run names the session and agent
        checkpoint = self.store.run(run_name).commit({MESSAGE: record}, metadata=metadata)
        self._logs.committed(run_name, checkpoint, record)  # no look at the head before: the commit's parent tells

    def read_message(self, session_id: str, agent_id: str, message_id: int, **kwargs: Any) -> SessionMessage | None:
        _check_message_id(message_id)
        log = self._logs.current(messages_run(self.prefix, session_id, agent_id))
        record = None if log is None else log.records.get(message_id)
        return None if record is None else session_message(record)

    def update_message(self, session_id: str, agent_id: str, session_message: SessionMessage, **kwargs: Any) -> None:
        message_id = _check_message_id(session_message.message_id)
        run_name = messages_run(self.prefix, session_id, agent_id)
        metadata = {"message_id": message_id}  # the run names the session and agent
        while True:
            before = self._logs.current(run_name)
            previous = None if before is None else before.records.get(message_id)
            if before is None or previous is None:
                raise SessionException(f"Message {message_id} does not exist")
            session_message.created_at = previous["created_at"]  # as Strands' repositories: the creation time is kept
            record = record_of(session_message, f"message {message_id} of agent {agent_id!r} in session {session_id!r}")
            try:
                checkpoint = self.store.run(run_name).commit({MESSAGE: record}, metadata=metadata, parent=before.head)
            except agentfs.Conflict:
                continue  # another writer appended meanwhile: read what it wrote first
            self._logs.committed(run_name, checkpoint, record)
            return

    def list_messages(
        self, session_id: str, agent_id: str, limit: int | None = None, offset: int = 0, **kwargs: Any
    ) -> list[SessionMessage]:
        log = self._logs.current(messages_run(self.prefix, session_id, agent_id))
        if log is None and self.store.run(agent_run(self.prefix, session_id, agent_id)).head_id() is None:
            raise SessionException(f"Messages directory missing from agent: {agent_id} in session {session_id}")
        records = {} if log is None else log.records
        ordered = sorted(records)
        page = ordered[offset : offset + limit] if limit is not None else ordered[offset:]
        return [session_message(records[message_id]) for message_id in page]

    # multi-agent state

    def create_multi_agent(self, session_id: str, multi_agent: MultiAgentBase, **kwargs: Any) -> None:
        run = self.store.run(multi_agent_run(self.prefix, session_id, multi_agent.id))
        state = as_json(multi_agent.serialize_state(), f"multi-agent {multi_agent.id!r} of session {session_id!r}")
        run.commit({STATE: state}, metadata={"session_id": session_id, "multi_agent_id": multi_agent.id})

    def read_multi_agent(self, session_id: str, multi_agent_id: str, **kwargs: Any) -> dict[str, Any] | None:
        head = self.store.run(multi_agent_run(self.prefix, session_id, multi_agent_id)).latest()
        return None if head is None else dict(stored(head, (STATE,))[STATE])

    def update_multi_agent(self, session_id: str, multi_agent: MultiAgentBase, **kwargs: Any) -> None:
        run = self.store.run(multi_agent_run(self.prefix, session_id, multi_agent.id))
        state = as_json(multi_agent.serialize_state(), f"multi-agent {multi_agent.id!r} of session {session_id!r}")
        while True:
            head = run.latest()
            if head is None:
                raise SessionException(f"MultiAgent state {multi_agent.id} in session {session_id} does not exist")
            stored(head, (STATE,))
            try:
                run.commit({STATE: state}, metadata={"session_id": session_id, "multi_agent_id": multi_agent.id}, parent=head.id)
                return
            except agentfs.Conflict:
                continue  # another writer moved the head: it still exists, so this update goes after it


# SessionMessage.from_dict keeps the keys of a record that are SessionMessage's parameters, which it looks up
# (inspect.signature) for every message: 60% of the time a resumed agent took to read 4,000 messages back
MESSAGE_PARAMETERS = frozenset(inspect.signature(SessionMessage).parameters)


def session_message(record: dict[str, Any]) -> SessionMessage:
    """SessionMessage.from_dict(record), its parameters looked up once (tests_strands/test_strands.py compares the two)."""
    return SessionMessage(**decode_bytes_values({key: value for key, value in record.items() if key in MESSAGE_PARAMETERS}))


def _check_message_id(message_id: object) -> int:
    if not isinstance(message_id, int):
        raise ValueError(f"message_id=<{message_id}> | message id must be an integer")
    return message_id
