"""AgentFSSessionRepository under a real Strands Agent and RepositorySessionManager with a scripted model
(no network): the same session as Strands' FileSessionManager keeps, each change one checkpoint, hostile
ids refused, writers that race lose nothing, an encrypted store by path, and a process SIGKILLed after a
journaled tool call that resumes from moto S3 on another machine with nothing repeated or lost.
"""

from __future__ import annotations

import dataclasses
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
from strands.types.exceptions import SessionException
from strands.types.session import Session, SessionAgent, SessionMessage, SessionType
from strands.types.tools import ToolContext

import agentfs
from agentfs.integrations.strands import AgentFSSessionRepository, InvalidId
from agentfs.integrations.strands.layout import as_json, record_of
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


@dataclasses.dataclass
class _Point:
    x: int
    raw: bytes


def test_records_are_what_strands_to_dict_makes_after_its_json_round_trip() -> None:
    """record_of takes a message or agent apart without to_dict's deep copy: the same record, bytes base64-encoded
    as encode_bytes_values does them (in dicts, lists and nested dataclasses), keys and times kept, and a value
    JSON cannot hold refused as before."""
    image = {"role": "user", "content": [{"image": {"format": "png", "source": {"bytes": bytes(range(256))}}}]}
    said = {"role": "assistant", "content": [{"text": "é secret"}]}
    redacted = SessionMessage(said, 1, redact_message={"role": "assistant", "content": []})  # type: ignore[arg-type]
    agent = SessionAgent(AGENT, {"blob": [b"\x00\xff", {"nested": b"abc"}], "point": _Point(1, b"\x01")}, {"n": (1, 2)})  # type: ignore[dict-item]
    for item in [SessionMessage.from_message(image, 0), redacted, agent, SessionAgent(AGENT, {}, {})]:
        assert record_of(item, "it") == as_json(item.to_dict(), "it")
    with pytest.raises(agentfs.SerializationError, match="strands it cannot be stored"):
        record_of(SessionAgent(AGENT, {"x": object()}, {}), "it")


def test_a_message_committed_after_a_read_leaves_the_read_messages_unchanged(tmp_path: Path) -> None:
    """Messages committed after the head a repository knows are added to what it knows in place, unless a reader
    holds it: the messages a reader was given stay as they were read."""
    with AgentFSSessionRepository(tmp_path / "store") as repository:
        repository.create_agent(SESSION, SessionAgent(AGENT, {}, {}))
        for message_id in range(3):
            repository.create_message(SESSION, AGENT, SessionMessage({"role": "user", "content": [{"text": "hi"}]}, message_id))
        run_name = repository.run(SESSION, AGENT).name
        read = repository._logs.current(run_name)
        assert read is not None and sorted(read.records) == [0, 1, 2]
        for message_id in range(3, 5):
            repository.create_message(SESSION, AGENT, SessionMessage({"role": "user", "content": [{"text": "hi"}]}, message_id))
        assert sorted(read.records) == [0, 1, 2] and read.head == repository.run(SESSION, AGENT).ids()[2]
        now = repository._logs.current(run_name)
        assert now is not None and sorted(now.records) == [0, 1, 2, 3, 4]
        assert [m.message_id for m in AgentFSSessionRepository(repository.store).list_messages(SESSION, AGENT)] == [0, 1, 2, 3, 4]


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


def test_an_update_after_another_writers_goes_after_its_record(tmp_path: Path) -> None:
    """A repository updates an agent after the head it last committed without reading it again: another writer's
    record in between (here the agent created again, with a new creation time) must make it read the new head,
    keep that creation time and append after it, as Strands' file repository keeps the file's."""
    first, later = "2026-01-01T00:00:00+00:00", "2026-01-02T00:00:00+00:00"
    with agentfs.open(tmp_path / "store") as store:
        ours, theirs = AgentFSSessionRepository(store), AgentFSSessionRepository(store)
        ours.create_agent(SESSION, SessionAgent(AGENT, {"n": 0}, {}, created_at=first))
        ours.update_agent(SESSION, SessionAgent(AGENT, {"n": 1}, {}))
        theirs.create_agent(SESSION, SessionAgent(AGENT, {"n": 2}, {}, created_at=later))
        update = SessionAgent(AGENT, {"n": 3}, {})
        ours.update_agent(SESSION, update)
        assert update.created_at == later
        run = store.run(f"strands/{SESSION}/agent/{AGENT}")
        head = run.latest()
        assert head is not None and head.state["agent"]["state"] == {"n": 3} and head.state["agent"]["created_at"] == later
        assert len(run.heads()) == 1, "the update did not go after the other writer's record"
        theirs.delete_session(SESSION)
        with pytest.raises(SessionException, match="does not exist"):
            ours.update_agent(SESSION, SessionAgent(AGENT, {"n": 4}, {}))


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
