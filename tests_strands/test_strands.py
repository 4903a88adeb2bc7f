"""AgentFSSessionRepository under a real Strands Agent and RepositorySessionManager with a scripted model
(no network): the same session as Strands' FileSessionManager keeps, each change one checkpoint, hostile
ids refused, writers that race lose nothing, an encrypted store by path, and a process SIGKILLed after a
journaled tool call that resumes from moto S3 on another machine with nothing repeated or lost.
"""

from __future__ import annotations

import json
import re
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

if __name__ != "__main__":
    import pytest

from strands import Agent, tool
from strands.session.file_session_manager import FileSessionManager
from strands.session.repository_session_manager import RepositorySessionManager
from strands.session.session_repository import SessionRepository
from strands.types.session import Session, SessionAgent, SessionMessage, SessionType
from strands.types.tools import ToolContext

import agentfs
from agentfs.integrations.strands import AgentFSSessionRepository, InvalidId
from agentfs.integrations.strands.repository import session_message
from tests.helpers import killed_turns
from tests_strands.scripted import ScriptedModel

SESSION, AGENT = "s1", "cashier"
QUESTIONS = ["pay 1", "pay 2", "pay 3"]


def make_agent(repository: SessionRepository, ledger: Path, stop_at: str = "") -> Agent:
    @tool(context=True)
    def pay(amount: int, tool_context: ToolContext) -> str:
        """Pay an amount."""
        if isinstance(repository, AgentFSSessionRepository):
            paid = repository.once(SESSION, tool_context, killed_turns.pay, str(ledger), amount)
        else:
            paid = killed_turns.pay(str(ledger), amount)
        killed_turns.report(f"paid {amount}", stop_at)  # the crash test's kill point: after the call, before its result
        tool_context.agent.state.set("last", amount)  # a value, not an increment: a tool that runs again sets the same
        return paid

    manager = RepositorySessionManager(session_id=SESSION, session_repository=repository)
    return Agent(model=ScriptedModel(), tools=[pay], agent_id=AGENT, session_manager=manager, callback_handler=None)


def prompts(messages: list[Any]) -> list[str]:
    return [block["text"] for m in messages if m["role"] == "user" for block in m["content"] if "text" in block]


def converse(repository: SessionRepository, ledger: Path, stop_at: str = "") -> list[str]:
    """Finish a tool call a crash cut short (Strands runs the tool of a trailing toolUse), then ask each question
    the session has not had yet; the answers."""
    agent = make_agent(repository, ledger, stop_at)
    answers = []
    if agent.messages and any("toolUse" in block for block in agent.messages[-1]["content"]):
        answers.append(str(agent()).strip())
        killed_turns.report(f"turn {prompts(agent.messages)[-1]}", stop_at)
    for question in QUESTIONS[len(prompts(agent.messages)) :]:
        answers.append(str(agent(question)).strip())
        killed_turns.report(f"turn {question}", stop_at)
    return answers


def kept(repository: SessionRepository) -> dict[str, Any]:
    """What a session holds, without times and Strands' random tracking ids."""
    messages = repository.list_messages(SESSION, AGENT)
    agent = repository.read_agent(SESSION, AGENT)
    assert agent is not None
    return {
        "ids": [m.message_id for m in messages],
        "messages": [{"role": m.message["role"], "content": m.message["content"]} for m in messages],
        "state": agent.state,
        "conversation": agent.conversation_manager_state,
    }


def test_a_real_agent_keeps_the_session_strands_file_session_manager_keeps(tmp_path: Path) -> None:
    with AgentFSSessionRepository(tmp_path / "store") as ours:
        theirs = FileSessionManager(session_id=SESSION, storage_dir=str(tmp_path / "files"))
        answers = converse(ours, tmp_path / "ledger-a")
        assert answers == converse(theirs, tmp_path / "ledger-b")
        assert answers[-1] == "done: paid 3 after 11 messages"  # the model saw the whole session
        assert kept(ours) == kept(theirs)
        assert kept(ours)["ids"] == list(range(12)) and kept(ours)["state"] == {"last": 3}
        assert len(ours.run(SESSION, AGENT).ids()) == 12  # one commit per message
        again = make_agent(AgentFSSessionRepository(ours.store), tmp_path / "ledger-a")  # a new agent resumes the session
        assert prompts(again.messages) == QUESTIONS and again.state.get() == {"last": 3}


def test_hostile_ids_are_refused_by_name(tmp_path: Path) -> None:
    with AgentFSSessionRepository(tmp_path / "store") as repository:
        for hostile in ["..", ".", "", "a/b", "..\\x", "nul\x00"]:
            with pytest.raises(InvalidId, match=re.escape(f"strands session id {hostile!r} is refused")):
                RepositorySessionManager(session_id=hostile, session_repository=repository)
            with pytest.raises(InvalidId, match=re.escape(f"strands agent id {hostile!r} is refused")):
                repository.create_agent(SESSION, SessionAgent(hostile, {}, {}))
        assert repository.store.runs() == []
        repository.create_session(Session("a b:c", SessionType.AGENT))  # any other text names its own run
        assert repository.read_session("a b:c") is not None and repository.read_session("a b") is None
        with pytest.raises(agentfs.SerializationError, match=r"message 0 of agent 'x' in session 's1' cannot be stored"):
            repository.create_message(SESSION, "x", SessionMessage({"role": "user", "content": [{"text": object()}]}, 0))  # type: ignore[typeddict-item]
        for kind in ["agent", "messages"]:
            repository.store.run(f"strands/s2/{kind}/x").commit({"something": "else"})
        with pytest.raises(agentfs.FormatError, match="'strands/s2/agent/x' is not a Strands session checkpoint"):
            repository.read_agent("s2", "x")
        with pytest.raises(agentfs.FormatError, match="'strands/s2/messages/x' is not a Strands session checkpoint"):
            repository.list_messages("s2", "x")
        with pytest.raises(ValueError, match="only when AgentFSSessionRepository opens the store"):
            AgentFSSessionRepository(repository.store, encryption="secret")


def test_messages_read_back_are_what_strands_from_dict_makes(tmp_path: Path) -> None:
    """list_messages makes each SessionMessage as SessionMessage.from_dict does (bytes decoded, unknown keys left
    out) without its per-message signature lookup: equal, field by field, for a message with image bytes, a
    redacted one and a record carrying a key Strands does not know."""
    image = {"role": "user", "content": [{"image": {"format": "png", "source": {"bytes": bytes(range(256))}}}]}
    redacted = SessionMessage(
        {"role": "assistant", "content": [{"text": "secret"}]}, 1, redact_message={"role": "assistant", "content": [{"text": "[redacted]"}]}
    )
    records = [
        SessionMessage.from_message(image, 0).to_dict(),
        redacted.to_dict(),
        {**SessionMessage.from_message({"role": "user", "content": [{"text": "hi"}]}, 2).to_dict(), "from_a_newer_strands": 1},
    ]
    for record in records:
        assert session_message(record) == SessionMessage.from_dict(record)
    with AgentFSSessionRepository(tmp_path / "store") as repository:
        repository.create_session(Session(SESSION, SessionType.AGENT))
        repository.create_agent(SESSION, SessionAgent(AGENT, {}, {}))
        for record in records[:2]:
            repository.create_message(SESSION, AGENT, SessionMessage.from_dict(record))
    with AgentFSSessionRepository(tmp_path / "store") as repository:
        assert repository.list_messages(SESSION, AGENT) == [SessionMessage.from_dict(record) for record in records[:2]]


def test_writers_appending_to_one_agent_lose_nothing(tmp_path: Path) -> None:
    with agentfs.open(tmp_path / "store") as store:
        AgentFSSessionRepository(store).create_agent(SESSION, SessionAgent(AGENT, {}, {}))
        writers = [AgentFSSessionRepository(store) for _ in range(4)]  # each its own knowledge of the messages

        def write(writer: int) -> None:
            for n in range(10):
                message = SessionMessage({"role": "user", "content": [{"text": f"{writer}.{n}"}]}, writer * 100 + n)
                writers[writer].create_message(SESSION, AGENT, message)

        with ThreadPoolExecutor(4) as pool:
            list(pool.map(write, range(4)))
        for repository in [*writers, AgentFSSessionRepository(store)]:
            ids = [m.message_id for m in repository.list_messages(SESSION, AGENT)]
            assert ids == [w * 100 + n for w in range(4) for n in range(10)]


def test_a_store_wide_retention_policy_keeps_every_message(tmp_path: Path) -> None:
    with AgentFSSessionRepository(tmp_path / "store") as repository:
        converse(repository, tmp_path / "ledger")
        repository.store.run("other").commit({"n": 1})
        repository.store.run("other").commit({"n": 2})
        repository.store.set_retention(keep_last=1)
        repository.store.gc(grace=0)
        assert len(repository.store.run("other").ids()) == 1  # the policy applies elsewhere
        again = AgentFSSessionRepository(repository.store)
        assert [m.message_id for m in again.list_messages(SESSION, AGENT)] == list(range(12))


def test_an_encrypted_store_by_path_names_nothing(tmp_path: Path) -> None:
    root = tmp_path / "store"
    with AgentFSSessionRepository(root, encryption="correct horse") as repository:
        converse(repository, tmp_path / "ledger")
    every_byte = b"".join(path.read_bytes() for path in root.rglob("*") if path.is_file())
    assert b"cashier" not in every_byte and b"paid 2" not in every_byte
    with pytest.raises(agentfs.WrongKey):
        AgentFSSessionRepository(root, encryption="wrong")
    with AgentFSSessionRepository(root, encryption="correct horse") as repository:
        assert prompts([m.message for m in repository.list_messages(SESSION, AGENT)]) == QUESTIONS


def test_sigkill_after_a_journaled_tool_call_resumes_from_s3_on_another_machine(tmp_path: Path, moto_server: Any) -> None:
    from tests.servers import make_s3_spec

    spec = make_s3_spec(moto_server)
    ledger = tmp_path / "ledger"
    child = killed_turns.start("tests_strands.test_strands", tmp_path / "machine-a", spec.url, spec.storage_options, ledger, "paid 2")
    assert killed_turns.kill_at(child, "paid 2") == ["paid 1", "turn pay 1", "paid 2"]

    with AgentFSSessionRepository(tmp_path / "machine-b", remote=spec.url, storage_options=spec.storage_options) as repository:
        cut = repository.list_messages(SESSION, AGENT)
        assert [m.message_id for m in cut] == list(range(6)) and "toolUse" in cut[-1].message["content"][0]  # pay 2's call, no result
        assert converse(repository, ledger) == ["done: paid 2 after 7 messages", "done: paid 3 after 11 messages"]
        assert killed_turns.payments(ledger) == [1, 2, 3], "a payment recorded in the journal was made again, or one was lost"
        reference = FileSessionManager(session_id=SESSION, storage_dir=str(tmp_path / "files"))
        converse(reference, tmp_path / "ledger-reference")
        assert kept(repository) == kept(reference)  # the same session as a run that was never killed
        assert repository.store.verify().ok


pytest_plugins = ["tests.servers"] if __name__ != "__main__" else []


def _machine_a(store_path: str, url: str, options: str, ledger: str, stop_at: str) -> None:
    """The killed child: converse on machine A; every commit and journal record is pushed before it is reported."""
    with agentfs.open(store_path) as store, store.sync(url, storage_options=json.loads(options)) as daemon:

        def pushed(line: str, stop: str) -> None:
            assert daemon.flush(timeout=60)
            print(line, flush=True)
            if line == stop:
                sys.stdin.readline()

        killed_turns.report = pushed  # type: ignore[assignment]
        converse(AgentFSSessionRepository(store), Path(ledger), stop_at)


if __name__ == "__main__":
    _machine_a(*sys.argv[1:6])
