"""AgentFSSessionService and AgentFSArtifactService under a real ADK Runner and LlmAgent with a scripted
model (no network), call by call against ADK's InMemorySessionService and InMemoryArtifactService; forks
at an event; and a process SIGKILLed after a journaled tool call that resumes from moto S3 on another
machine with nothing repeated or lost.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncGenerator
from pathlib import Path
from typing import Any

if __name__ != "__main__":
    import pytest

    pytest.importorskip("google.adk")
    pytestmark = pytest.mark.filterwarnings("ignore:.*ResumabilityConfig:UserWarning")  # ADK's resume, which the crash test uses

from google.adk.agents import LlmAgent
from google.adk.apps import App, ResumabilityConfig
from google.adk.artifacts import InMemoryArtifactService
from google.adk.artifacts.base_artifact_service import BaseArtifactService
from google.adk.errors._stale_session_error import StaleSessionError
from google.adk.events import Event, EventActions
from google.adk.models.base_llm import BaseLlm
from google.adk.models.llm_request import LlmRequest
from google.adk.models.llm_response import LlmResponse
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.adk.sessions.base_session_service import BaseSessionService
from google.adk.sessions.session import Session
from google.adk.tools import ToolContext
from google.genai import types

import agentfs
from agentfs.integrations.adk import AgentFSArtifactService, AgentFSSessionService
from agentfs.testing.adk_services import AdkServiceConformance
from tests.helpers import killed_turns

APP, USER = "shop", "ada"
QUESTIONS = ["pay 1", "pay 2", "pay 3"]


class ScriptedModel(BaseLlm):
    """`pay N` calls the pay tool with N (call id fixed by the question); a tool's response is answered in text."""

    model: str = "scripted"

    async def generate_content_async(self, llm_request: LlmRequest, stream: bool = False) -> AsyncGenerator[LlmResponse, None]:
        part = llm_request.contents[-1].parts[0]  # type: ignore[index]
        if part.function_response is not None:
            answer = f"done: {part.function_response.response['result']} after {len(llm_request.contents)} contents"  # type: ignore[index]
            yield LlmResponse(content=types.Content(role="model", parts=[types.Part(text=answer)]))
            return
        amount = int(str(part.text).split()[1])
        call = types.FunctionCall(id=f"call-pay-{amount}", name="pay", args={"amount": amount})
        yield LlmResponse(content=types.Content(role="model", parts=[types.Part(function_call=call)]))


def make_runner(sessions: BaseSessionService, artifacts: BaseArtifactService, ledger: Path, stop_at: str = "") -> Runner:
    async def pay(amount: int, tool_context: ToolContext) -> str:
        """Pay an amount."""
        if isinstance(sessions, AgentFSSessionService):
            paid = sessions.once(tool_context, killed_turns.pay, str(ledger), amount)
        else:
            paid = killed_turns.pay(str(ledger), amount)
        killed_turns.report(f"paid {amount}", stop_at)  # the crash test's kill point: after the call, before its response
        tool_context.state["user:total"] = tool_context.state.get("user:total", 0) + amount
        tool_context.state["temp:scratch"] = amount
        tool_context.state["last"] = amount
        version = await tool_context.save_artifact("receipt.txt", types.Part(text=paid))
        await tool_context.save_artifact(
            "user:card.bin", types.Part.from_bytes(data=bytes([amount]) * 3, mime_type="application/octet-stream")
        )
        return f"{paid} (receipt v{version})"

    agent = LlmAgent(name="cashier", model=ScriptedModel(), tools=[pay])
    app = App(name=APP, root_agent=agent, resumability_config=ResumabilityConfig(is_resumable=True))
    return Runner(app=app, session_service=sessions, artifact_service=artifacts)


async def converse(runner: Runner, session_id: str, stop_at: str = "") -> list[Event]:
    """Finish an invocation a crash cut short (ADK's resume), then ask each question the session has not had yet;
    the events the runner yielded."""
    session = await runner.session_service.get_session(app_name=APP, user_id=USER, session_id=session_id)
    assert session is not None
    asked = [e.content.parts[0].text for e in session.events if e.author == "user" and e.content and e.content.parts]
    yielded = []
    if session.events and not session.events[-1].is_final_response():
        async for event in runner.run_async(user_id=USER, session_id=session_id, invocation_id=session.events[-1].invocation_id):
            yielded.append(event)
        killed_turns.report(f"turn {asked[-1]}", stop_at)
    for question in QUESTIONS[len(asked) :]:
        message = types.Content(role="user", parts=[types.Part(text=question)])
        async for event in runner.run_async(user_id=USER, session_id=session_id, new_message=message, yield_user_message=True):
            yielded.append(event)
        killed_turns.report(f"turn {question}", stop_at)
    return yielded


def shape(event: Event) -> dict[str, Any]:
    """What an event says, without its random ids and times: for comparing two runs of the same script."""
    dumped = event.model_dump(mode="json", exclude_none=True, include={"author", "content", "actions", "partial", "turn_complete"})
    return dumped


def services(tmp_path: Path) -> tuple[agentfs.Store, AgentFSSessionService, AgentFSArtifactService]:
    store = agentfs.open(tmp_path / "store")
    return store, AgentFSSessionService(store), AgentFSArtifactService(store)


def test_a_real_runner_gives_the_same_sessions_and_artifacts_as_adks_in_memory_services(tmp_path: Path) -> None:
    store, sessions, artifacts = services(tmp_path)
    memory_sessions, memory_artifacts = InMemorySessionService(), InMemoryArtifactService()

    async def drive(session_service: BaseSessionService, artifact_service: BaseArtifactService, ledger: Path) -> dict[str, Any]:
        await session_service.create_session(app_name=APP, user_id=USER, session_id="s1", state={"app:currency": "EUR", "greeting": "hi"})
        runner = make_runner(session_service, artifact_service, ledger)
        yielded = await converse(runner, "s1")
        session = await session_service.get_session(app_name=APP, user_id=USER, session_id="s1")
        assert session is not None
        assert [e.model_dump() for e in session.events] == [e.model_dump() for e in yielded]  # every yielded event kept, in order
        keys = await artifact_service.list_artifact_keys(app_name=APP, user_id=USER, session_id="s1")
        receipts = [
            await artifact_service.load_artifact(app_name=APP, user_id=USER, session_id="s1", filename="receipt.txt", version=v)
            for v in range(3)
        ]
        return {"events": [shape(e) for e in session.events], "state": session.state, "keys": keys, "receipts": receipts}

    ours = asyncio.run(drive(sessions, artifacts, tmp_path / "ledger-a"))
    theirs = asyncio.run(drive(memory_sessions, memory_artifacts, tmp_path / "ledger-b"))
    assert ours == theirs
    assert ours["state"] == {"greeting": "hi", "last": 3, "app:currency": "EUR", "user:total": 6}  # temp: never stored
    assert len(sessions.run(APP, USER, "s1").ids()) == 1 + len(ours["events"])  # the creation, then one checkpoint per event
    store.close()


class TestAgentFSServices(AdkServiceConformance):
    """Every session and artifact call returns what ADK's in-memory services return, call by call."""

    def make_session_service(self, tmp_path: Path) -> BaseSessionService:
        return AgentFSSessionService(agentfs.open(tmp_path / "sessions"))

    def make_artifact_service(self, tmp_path: Path) -> BaseArtifactService:
        return AgentFSArtifactService(agentfs.open(tmp_path / "artifacts"))


def test_a_stale_session_copy_is_refused(tmp_path: Path) -> None:
    store, sessions, _artifacts = services(tmp_path)

    async def race() -> None:
        created = await sessions.create_session(app_name=APP, user_id=USER, session_id="s")
        one = await sessions.get_session(app_name=APP, user_id=USER, session_id="s")
        two = await sessions.get_session(app_name=APP, user_id=USER, session_id="s")
        assert one is not None and two is not None
        await sessions.append_event(one, Event(author="agent", timestamp=created.last_update_time + 1))
        with pytest.raises(StaleSessionError, match=r"'s' of app 'shop'.*stale"):
            await sessions.append_event(two, Event(author="agent", timestamp=created.last_update_time + 2))
        await sessions.append_event(one, Event(author="agent", timestamp=created.last_update_time + 3))  # the current copy goes on

    asyncio.run(race())
    store.close()


def test_a_run_that_is_no_session_is_refused_by_name(tmp_path: Path) -> None:
    store, sessions, _artifacts = services(tmp_path)
    sessions.run(APP, USER, "odd").commit({"something": "else"}, metadata={"last_update_time": 1.0})
    with pytest.raises(agentfs.FormatError, match="'adk/shop/session/ada/odd' is not a Google ADK session checkpoint"):
        asyncio.run(sessions.get_session(app_name=APP, user_id=USER, session_id="odd"))
    odd = Session(app_name=APP, user_id=USER, id="odd", last_update_time=2.0)
    with pytest.raises(agentfs.FormatError, match="not a Google ADK session checkpoint"):
        asyncio.run(sessions.append_event(odd, Event(author="agent")))
    with pytest.raises(ValueError, match="only when AgentFSSessionService opens the store"):
        AgentFSSessionService(store, remote="s3://bucket")
    store.close()


def test_a_session_stored_whole_reads_and_grows_by_its_new_events(tmp_path: Path) -> None:
    """A session whose checkpoints hold the whole events list (as every append wrote it before each event became
    its own checkpoint) is read and appended to by a service that did not write it; each append stores its event."""
    store, _sessions, _artifacts = services(tmp_path)
    first = Event(author="user", invocation_id="i1", timestamp=10.0, content=types.Content(role="user", parts=[types.Part(text="hi")]))
    stored = [first.model_dump(mode="json", exclude_none=True)]
    metadata = {"app_name": APP, "user_id": USER, "session_id": "old", "events": 1, "last_update_time": 10.0, "last_event_id": first.id}
    sessions = AgentFSSessionService(store)
    sessions.run(APP, USER, "old").commit({"events": stored, "state": {"k": 1}}, metadata=metadata, parent=None)

    async def grow() -> None:
        session = await sessions.get_session(app_name=APP, user_id=USER, session_id="old")
        assert session is not None and [e.id for e in session.events] == [first.id] and session.state == {"k": 1}
        added = [Event(author="agent", timestamp=11.0 + n, actions=EventActions(state_delta={"k": n})) for n in range(3)]
        for event in added:
            await sessions.append_event(session, event)
        again = await AgentFSSessionService(store).get_session(app_name=APP, user_id=USER, session_id="old")  # read from the store
        assert again is not None and [e.model_dump() for e in again.events] == [e.model_dump() for e in [first, *added]]
        assert again.state == {"k": 2}
        head = sessions.run(APP, USER, "old").latest()
        assert head is not None and head.state == {"event": added[-1].model_dump(mode="json", exclude_none=True), "state": {"k": 2}}

    asyncio.run(grow())
    store.close()


def test_a_forked_session_holds_the_events_up_to_the_fork_and_diverges_after(tmp_path: Path) -> None:
    store, sessions, artifacts = services(tmp_path)

    async def fork() -> None:
        await sessions.create_session(app_name=APP, user_id=USER, session_id="s1")
        runner = make_runner(sessions, artifacts, tmp_path / "ledger")
        await converse(runner, "s1")
        original = await sessions.get_session(app_name=APP, user_id=USER, session_id="s1")
        assert original is not None
        turn = len(original.events) // len(QUESTIONS)  # each turn's events: question, call, response, answer, ADK's end marks
        forked = await sessions.fork_session(
            app_name=APP, user_id=USER, session_id="s1", new_session_id="retry", at_event_id=original.events[turn - 1].id
        )
        assert [e.id for e in forked.events] == [e.id for e in original.events[:turn]]
        assert forked.state["last"] == 1 and original.state["last"] == 3  # the session state as it was at the fork
        run = sessions.run(APP, USER, "retry")
        assert run.get(run.ids()[0]).forked_from is not None  # borrowed, not copied
        message = types.Content(role="user", parts=[types.Part(text="pay 9")])
        async for _event in runner.run_async(user_id=USER, session_id="retry", new_message=message):
            pass
        after = await sessions.get_session(app_name=APP, user_id=USER, session_id="retry")
        again = await sessions.get_session(app_name=APP, user_id=USER, session_id="s1")
        assert after is not None and again is not None
        assert (
            len(after.events) == 2 * turn and after.state["last"] == 9 and [e.id for e in again.events] == [e.id for e in original.events]
        )
        with pytest.raises(Exception, match="retry already exists"):
            await sessions.fork_session(app_name=APP, user_id=USER, session_id="s1", new_session_id="retry")
        with pytest.raises(Exception, match="no event 'nope'"):
            await sessions.fork_session(app_name=APP, user_id=USER, session_id="s1", at_event_id="nope")

    asyncio.run(fork())
    store.close()


def test_sigkill_after_a_journaled_tool_call_resumes_from_s3_on_another_machine(tmp_path: Path, moto_server: Any) -> None:
    from tests.servers import make_s3_spec

    spec = make_s3_spec(moto_server)
    ledger = tmp_path / "ledger"
    child = killed_turns.start("tests.integrations.test_adk", tmp_path / "machine-a", spec.url, spec.storage_options, ledger, "paid 2")
    assert killed_turns.kill_at(child, "paid 2") == ["paid 1", "turn pay 1", "paid 2"]

    async def resume() -> None:
        remote = {"remote": spec.url, "storage_options": spec.storage_options}
        store = agentfs.open(tmp_path / "machine-b", **remote)
        sessions, artifacts = AgentFSSessionService(store), AgentFSArtifactService(store)
        receipt = await artifacts.load_artifact(app_name=APP, user_id=USER, session_id="s1", filename="receipt.txt", version=0)
        assert receipt is not None and receipt.text == "paid 1"  # saved as version 0 on machine A, loaded at 0 here
        yielded = await converse(make_runner(sessions, artifacts, ledger), "s1")
        assert [e.content.parts[0].text for e in yielded if e.content and e.content.parts and e.content.parts[0].text] == [
            "done: paid 2 (receipt v1) after 7 contents",
            "pay 3",
            "done: paid 3 (receipt v2) after 11 contents",
        ]
        session = await sessions.get_session(app_name=APP, user_id=USER, session_id="s1")
        assert session is not None
        asked = [e.content.parts[0].text for e in session.events if e.author == "user" and e.content and e.content.parts]
        assert asked == QUESTIONS and session.state["user:total"] == 6
        assert await artifacts.list_versions(app_name=APP, user_id=USER, session_id="s1", filename="receipt.txt") == [0, 1, 2]
        assert store.verify().ok
        store.close()

    asyncio.run(resume())
    assert killed_turns.payments(ledger) == [1, 2, 3], "a payment recorded in the journal was made again, or one was lost"


def _machine_a(store_path: str, url: str, options: str, ledger: str, stop_at: str) -> None:
    """The killed child: converse on machine A; every commit and journal record is pushed before it is reported."""

    async def life() -> None:
        with agentfs.open(store_path) as store, store.sync(url, storage_options=json.loads(options)) as daemon:
            sessions, artifacts = AgentFSSessionService(store), AgentFSArtifactService(store)
            await sessions.create_session(app_name=APP, user_id=USER, session_id="s1")

            def pushed(line: str, stop: str) -> None:
                assert daemon.flush(timeout=60)
                print(line, flush=True)
                if line == stop:
                    sys.stdin.readline()

            killed_turns.report = pushed  # type: ignore[assignment]
            await converse(make_runner(sessions, artifacts, Path(ledger), stop_at), "s1", stop_at)

    asyncio.run(life())


if __name__ == "__main__":
    _machine_a(*sys.argv[1:6])
