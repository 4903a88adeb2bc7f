"""AgentFSSessionRepository: Strands' `SessionRepository` over agentfs runs (see layout.py).

Give it to Strands' `RepositorySessionManager(session_id=..., session_repository=repository)`:

- every create or update is one durable checkpoint of one run (the session's, the agent's or the
  multi-agent's), committed with `parent=` the head it read; a writer that lost the race reads the new
  head and applies its change again, so nothing another writer committed is lost;
- answers and errors are those of Strands' `FileSessionManager` (`SessionException` for a session that
  exists or a record that does not, `None` for a missing read; agentfs.testing.strands_repository
  checks it call by call), except that hostile ids (`..`, a path separator) are refused by name
  (layout.InvalidId, a ValueError as Strands raises for a separator);
- what Strands lacks: `once`, which runs a tool's side effect at most once per tool use id in the
  agent's journal, so an agent that resumes a tool call after a crash gets the recorded result.
"""

from __future__ import annotations

import bisect
import os
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, Literal, NamedTuple, TypeVar

from strands.multiagent.base import MultiAgentBase
from strands.session.session_repository import SessionRepository
from strands.types.exceptions import SessionException
from strands.types.session import Session, SessionAgent, SessionMessage
from strands.types.tools import ToolContext

import agentfs

from ..run_names import open_or_use
from .layout import AGENT, MESSAGES, PREFIX, SESSION, STATE, agent_run, as_json, multi_agent_run, session_root, session_run, stored

T = TypeVar("T")
RECENT_AGENTS = 32  # agent heads kept as last committed here, so an append does not decode the messages again


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
        # run name -> the agent head committed here. Hazard: never handed out (reads build Strands objects from
        # copies: from_dict decodes into new dicts and lists), and changes build new lists, never edit these.
        self._written: OrderedDict[str, _AgentHead] = OrderedDict()
        self._lock = threading.Lock()

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
        """The agentfs run of an agent in a session: its history, forks, journal and sync work as for any run."""
        return self.store.run(agent_run(self.prefix, session_id, agent_id))

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
            with self._lock:
                self._written.pop(name, None)

    # agents and their messages

    def create_agent(self, session_id: str, session_agent: SessionAgent, **kwargs: Any) -> None:
        record = as_json(session_agent.to_dict(), f"agent {session_agent.agent_id!r} of session {session_id!r}")
        self._change_agent(session_id, session_agent.agent_id, lambda _agent, messages: (record, messages))

    def read_agent(self, session_id: str, agent_id: str, **kwargs: Any) -> SessionAgent | None:
        head = self._head(agent_run(self.prefix, session_id, agent_id))
        return None if head is None or head.agent is None else SessionAgent.from_dict(head.agent)

    def update_agent(self, session_id: str, session_agent: SessionAgent, **kwargs: Any) -> None:
        def update(agent: dict[str, Any] | None, messages: list[Any]) -> tuple[dict[str, Any], list[Any]]:
            if agent is None:
                raise SessionException(f"Agent {session_agent.agent_id} in session {session_id} does not exist")
            session_agent.created_at = agent["created_at"]  # as Strands' repositories: the creation time is kept
            return as_json(session_agent.to_dict(), f"agent {session_agent.agent_id!r} of session {session_id!r}"), messages

        self._change_agent(session_id, session_agent.agent_id, update)

    def create_message(self, session_id: str, agent_id: str, session_message: SessionMessage, **kwargs: Any) -> None:
        message_id = _check_message_id(session_message.message_id)
        record = as_json(session_message.to_dict(), f"message {message_id} of agent {agent_id!r} in session {session_id!r}")
        self._change_agent(session_id, agent_id, lambda agent, messages: (agent, _placed(messages, record)))

    def read_message(self, session_id: str, agent_id: str, message_id: int, **kwargs: Any) -> SessionMessage | None:
        _check_message_id(message_id)
        head = self._head(agent_run(self.prefix, session_id, agent_id))
        if head is None:
            return None
        found = _find(head.messages, message_id)
        return None if found is None else SessionMessage.from_dict(head.messages[found])

    def update_message(self, session_id: str, agent_id: str, session_message: SessionMessage, **kwargs: Any) -> None:
        message_id = _check_message_id(session_message.message_id)

        def update(agent: dict[str, Any] | None, messages: list[Any]) -> tuple[dict[str, Any] | None, list[Any]]:
            found = _find(messages, message_id)
            if found is None:
                raise SessionException(f"Message {message_id} does not exist")
            session_message.created_at = messages[found]["created_at"]  # as Strands' repositories: the creation time is kept
            record = as_json(session_message.to_dict(), f"message {message_id} of agent {agent_id!r} in session {session_id!r}")
            return agent, [*messages[:found], record, *messages[found + 1 :]]

        self._change_agent(session_id, agent_id, update)

    def list_messages(
        self, session_id: str, agent_id: str, limit: int | None = None, offset: int = 0, **kwargs: Any
    ) -> list[SessionMessage]:
        head = self._head(agent_run(self.prefix, session_id, agent_id))
        if head is None:
            raise SessionException(f"Messages directory missing from agent: {agent_id} in session {session_id}")
        page = head.messages[offset : offset + limit] if limit is not None else head.messages[offset:]
        return [SessionMessage.from_dict(message) for message in page]

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

    # the agent run: read from the last commit made here when it is still the head

    def _head(self, run_name: str) -> _AgentHead | None:
        head_id = self.store.run(run_name).head_id()
        if head_id is None:
            return None
        with self._lock:
            written = self._written.get(run_name)
        if written is not None and written.id == head_id:
            return written
        state = stored(self.store.run(run_name).get(head_id), (AGENT, MESSAGES))
        if not isinstance(state[MESSAGES], list):
            raise agentfs.FormatError(f"checkpoint {head_id} of run {run_name!r} is not a Strands session checkpoint")
        return _AgentHead(head_id, state[AGENT], state[MESSAGES])

    def _change_agent(
        self, session_id: str, agent_id: str, change: Callable[[dict[str, Any] | None, list[Any]], tuple[dict[str, Any] | None, list[Any]]]
    ) -> None:
        """Commit `change(agent record, messages)` of the agent's head as one checkpoint; again on a newer head if
        another writer moved it meanwhile."""
        run_name = agent_run(self.prefix, session_id, agent_id)
        run = self.store.run(run_name)
        while True:
            head = self._head(run_name)
            agent, messages = change(None, []) if head is None else change(head.agent, head.messages)
            metadata = {"session_id": session_id, "agent_id": agent_id, MESSAGES: len(messages)}
            try:
                checkpoint = run.commit({AGENT: agent, MESSAGES: messages}, metadata=metadata, parent=None if head is None else head.id)
            except agentfs.Conflict:
                continue
            with self._lock:
                self._written[run_name] = _AgentHead(checkpoint.id, agent, messages)
                self._written.move_to_end(run_name)
                while len(self._written) > RECENT_AGENTS:
                    self._written.popitem(last=False)
            return


class _AgentHead(NamedTuple):
    id: str
    agent: dict[str, Any] | None  # SessionAgent.to_dict(); None while only messages were written
    messages: list[Any]  # SessionMessage.to_dict() each, in message id order


def _check_message_id(message_id: object) -> int:
    if not isinstance(message_id, int):
        raise ValueError(f"message_id=<{message_id}> | message id must be an integer")
    return message_id


def _find(messages: list[Any], message_id: int) -> int | None:
    """The index of the message with `message_id` (the list is in id order; usually id == index)."""
    if 0 <= message_id < len(messages) and messages[message_id]["message_id"] == message_id:
        return message_id
    index = bisect.bisect_left(messages, message_id, key=lambda message: message["message_id"])
    return index if index < len(messages) and messages[index]["message_id"] == message_id else None


def _placed(messages: list[Any], record: dict[str, Any]) -> list[Any]:
    """`messages` with `record` in its place by message id: appended, inserted, or replacing one with its id."""
    message_id = record["message_id"]
    if not messages or messages[-1]["message_id"] < message_id:
        return [*messages, record]
    index = bisect.bisect_left(messages, message_id, key=lambda message: message["message_id"])
    replaced = index < len(messages) and messages[index]["message_id"] == message_id
    return [*messages[:index], record, *messages[index + (1 if replaced else 0) :]]
