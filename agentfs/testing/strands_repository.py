"""A conformance test class for Strands session repositories, differential against Strands' own
`FileSessionManager` (itself a `SessionRepository`): the same calls on both, each answer compared.

Strands' wheel ships no tests for this interface, so its file repository is the reference. Subclass it
in a test module:

    class TestMyRepository(StrandsRepositoryConformance):
        def make_repository(self, tmp_path): return MyRepository(tmp_path / "db")

Records are compared whole (`to_dict()`, times included: the inputs carry fixed times, so a kept
creation time shows); errors by their kind (SessionException, ValueError, else the type). Both
repositories first get a session through Strands' `RepositorySessionManager`, as an agent's session
manager makes one. Needs pytest and strands-agents (`pip install agentfs-store[strands]`); import it
from `agentfs.testing.strands_repository` (agentfs.testing itself does not import Strands).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

from strands.multiagent.base import MultiAgentBase
from strands.session.file_session_manager import FileSessionManager
from strands.session.repository_session_manager import RepositorySessionManager
from strands.session.session_repository import SessionRepository
from strands.types.exceptions import SessionException
from strands.types.session import Session, SessionAgent, SessionMessage, SessionType

FIRST, LATER = "2026-01-01T00:00:00+00:00", "2026-01-02T00:00:00+00:00"


class _Orchestrator(MultiAgentBase):
    """The least multi-agent: an id and a state to serialize."""

    def __init__(self, multi_agent_id: str, step: int) -> None:
        super().__init__()
        self.id = multi_agent_id
        self.step = step

    async def invoke_async(self, task: Any, invocation_state: Any = None, **kwargs: Any) -> Any:
        raise NotImplementedError

    def serialize_state(self) -> dict[str, Any]:
        return {"type": "orchestrator", "id": self.id, "step": self.step, "nested": {"done": [f"n{i}" for i in range(self.step)]}}

    def deserialize_state(self, payload: dict[str, Any]) -> None:
        self.step = payload["step"]


def _outcome(call: Callable[[], Any]) -> Any:
    try:
        return _seen(call())
    except Exception as exc:  # the kind of error is what the two repositories must agree on
        kind = next((kind for kind in (SessionException, ValueError) if isinstance(exc, kind)), type(exc))
        return kind.__name__


def _seen(value: Any) -> Any:
    if isinstance(value, list):
        return [_seen(item) for item in value]
    return value.to_dict() if isinstance(value, Session | SessionAgent | SessionMessage) else value


def _message(message_id: int, text: str, created: str = FIRST) -> SessionMessage:
    content: list[Any] = [{"text": text}]
    if message_id % 3 == 1:
        content.append({"toolUse": {"toolUseId": f"t{message_id}", "name": "pay", "input": {"amount": message_id}}})
    if message_id == 2:
        content.append({"image": {"format": "png", "source": {"bytes": b"\x89PNG\x00\xff" * 50}}})
    role = "user" if message_id % 2 == 0 else "assistant"
    return SessionMessage({"role": role, "content": content}, message_id, created_at=created, updated_at=created)


def _agent(agent_id: str, turn: int, created: str = FIRST) -> SessionAgent:
    return SessionAgent(
        agent_id=agent_id,
        state={"turn": turn, "tags": ["a", "b"], "nested": {"x": None, "y": 1.5}},
        conversation_manager_state={"__name__": "SlidingWindowConversationManager", "removed_message_count": turn},
        _internal_state={"interrupt_state": {"activated": False, "interrupts": {}, "context": {}}, "model_state": {}},
        created_at=created,
        updated_at=created,
    )


def _calls(repository: SessionRepository) -> list[Any]:
    """The same calls on either repository; what each returned (records as dicts) or raised (its type)."""
    results: list[Any] = []

    def call(fn: Callable[[], Any]) -> None:
        results.append(_outcome(fn))

    session = Session("s1", SessionType.AGENT, created_at=FIRST, updated_at=FIRST)
    call(lambda: repository.create_session(session))
    call(lambda: repository.create_session(Session("s1", SessionType.AGENT)))  # exists
    call(lambda: repository.read_session("s1"))
    call(lambda: repository.read_session("s0") is not None)  # made by RepositorySessionManager (at its own time)
    call(lambda: repository.read_session("nope"))
    call(lambda: repository.read_agent("s1", "a1"))
    call(lambda: repository.update_agent("s1", _agent("a1", 0)))  # no such agent
    call(lambda: repository.create_agent("s1", _agent("a1", 0)))
    call(lambda: repository.read_agent("s1", "a1"))
    call(lambda: repository.list_messages("s1", "a1"))
    for message_id in range(7):
        call(functools.partial(repository.create_message, "s1", "a1", _message(message_id, f"m{message_id}")))
    later = _agent("a1", 3, created=LATER)
    call(lambda: repository.update_agent("s1", later))
    results.append(later.created_at)  # the creation time is kept, on the caller's object too
    call(lambda: repository.read_agent("s1", "a1"))
    for limit, offset in [(None, 0), (2, 0), (2, 3), (None, 5), (10, 4), (0, 0), (3, 9), (None, -2)]:
        call(functools.partial(repository.list_messages, "s1", "a1", limit=limit, offset=offset))
    for message_id in [0, 2, 6, 7, 99]:
        call(functools.partial(repository.read_message, "s1", "a1", message_id))
    redacted = _message(4, "[redacted]", created=LATER)
    redacted.redact_message = {"role": "user", "content": [{"text": "[redacted]"}]}
    call(lambda: repository.update_message("s1", "a1", redacted))
    results.append(redacted.created_at)
    call(lambda: repository.read_message("s1", "a1", 4))
    call(lambda: repository.update_message("s1", "a1", _message(42, "missing")))
    call(lambda: repository.create_message("s1", "a1", _message(3, "again")))  # a repeated id replaces its message
    call(lambda: repository.create_message("s1", "a1", _message(10, "a gap")))  # ids need not be consecutive
    call(lambda: repository.create_message("s1", "a1", _message(8, "into the gap")))
    call(lambda: repository.list_messages("s1", "a1", offset=5))
    call(lambda: repository.read_message("s1", "a1", "1"))  # type: ignore[arg-type]
    call(lambda: repository.create_agent("s1", _agent("a2", 1)))  # a second agent has its own messages
    call(lambda: repository.create_message("s1", "a2", _message(0, "other agent")))
    call(lambda: repository.list_messages("s1", "a2"))
    call(lambda: repository.create_agent("s1", _agent("a1", 9)))  # created again: its messages stay
    call(lambda: repository.read_agent("s1", "a1"))
    call(lambda: repository.list_messages("s1", "a1", limit=2))
    call(lambda: repository.list_messages("s1", "nobody"))  # no such agent
    call(lambda: repository.read_message("s1", "nobody", 0))
    call(lambda: repository.read_agent("elsewhere", "a1"))
    call(lambda: repository.read_multi_agent("s1", "team"))
    call(lambda: repository.update_multi_agent("s1", _Orchestrator("team", 1)))  # no state yet
    call(lambda: repository.create_multi_agent("s1", _Orchestrator("team", 1)))
    call(lambda: repository.read_multi_agent("s1", "team"))
    call(lambda: repository.update_multi_agent("s1", _Orchestrator("team", 4)))
    call(lambda: repository.read_multi_agent("s1", "team"))
    for hostile in ["a/b", "../s1", "/abs"]:  # a path separator: ValueError from both
        call(functools.partial(repository.read_session, hostile))
        call(functools.partial(repository.read_agent, "s1", hostile))
        call(functools.partial(repository.create_session, Session(hostile, SessionType.AGENT)))
        call(functools.partial(repository.create_message, "s1", hostile, _message(0, "x")))
    delete = getattr(repository, "delete_session", None)  # not in the interface; Strands' repositories have it
    if delete is not None:
        call(functools.partial(delete, "s1"))
        call(lambda: repository.read_session("s1"))
        call(lambda: repository.read_agent("s1", "a1"))
        call(lambda: repository.read_multi_agent("s1", "team"))
        call(lambda: repository.list_messages("s1", "a1"))
        call(functools.partial(delete, "s1"))  # gone
        call(lambda: repository.create_session(Session("s1", SessionType.AGENT, created_at=LATER, updated_at=LATER)))
        call(lambda: repository.create_agent("s1", _agent("a1", 0)))
        call(lambda: repository.list_messages("s1", "a1"))  # a new session starts empty
        call(lambda: repository.read_session("s0") is not None)  # the other session is untouched
    return results


class StrandsRepositoryConformance:
    """Each repository call answers as Strands' FileSessionManager does (see the module's docstring)."""

    def make_repository(self, tmp_path: Path) -> SessionRepository:
        raise NotImplementedError

    def test_each_call_answers_as_strands_file_session_manager(self, tmp_path: Path) -> None:
        ours = self.make_repository(tmp_path)
        RepositorySessionManager(session_id="s0", session_repository=ours)
        reference = FileSessionManager(session_id="s0", storage_dir=str(tmp_path / "strands-files"))
        mine, theirs = _calls(ours), _calls(reference)
        for index, (answer, strands_answer) in enumerate(zip(mine, theirs, strict=True)):
            assert answer == strands_answer, f"call {index}: {answer!r:.300} != {strands_answer!r:.300}"
