"""A conformance test class for Google ADK session and artifact services, differential against ADK's own
InMemorySessionService and InMemoryArtifactService: the same calls on both, each answer compared.

ADK's sdist ships no tests for these interfaces, so this is the reference. Subclass it in a test module:

    class TestMyServices(AdkServiceConformance):
        def make_session_service(self, tmp_path): return MySessionService(tmp_path / "db")
        def make_artifact_service(self, tmp_path): return MyArtifactService(tmp_path / "files")

Sessions are compared by id, user, state and event ids (not their times); errors by their type.
Needs pytest and google-adk (`pip install agentfs-store[adk]`); import it from
`agentfs.testing.adk_services` (agentfs.testing itself does not import ADK).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from pathlib import Path
from typing import Any

from google.adk.artifacts import InMemoryArtifactService
from google.adk.artifacts.base_artifact_service import BaseArtifactService
from google.adk.events import Event, EventActions
from google.adk.sessions import InMemorySessionService
from google.adk.sessions.base_session_service import BaseSessionService, GetSessionConfig
from google.adk.sessions.session import Session
from google.genai import types

APP, USER = "shop", "ada"


async def _outcome(call: Awaitable[Any]) -> Any:
    try:
        return await call
    except Exception as exc:  # the error's type is what the two services must agree on
        return type(exc).__name__


def _seen(session: Session | None) -> Any:
    return None if session is None else (session.id, session.user_id, session.state, [e.id for e in session.events])


async def _session_calls(sessions: BaseSessionService) -> list[Any]:
    """The same calls on either service; what each returned (sessions without their times)."""

    results: list[Any] = []

    created = await sessions.create_session(
        app_name=APP, user_id=USER, session_id=" s1 ", state={"app:a": 1, "user:u": 2, "temp:t": 3, "k": 4}
    )
    results.append(_seen(created))
    results.append(await _outcome(sessions.create_session(app_name=APP, user_id=USER, session_id="s1")))
    await sessions.create_session(app_name=APP, user_id="bob", session_id="s2", state={"k": "bob"})
    events = [
        Event(
            id=f"e{n}", invocation_id="i", author="agent", timestamp=created.last_update_time + n, actions=EventActions(state_delta=delta)
        )
        for n, delta in enumerate([{"k": 5, "temp:x": 1}, {"app:a": 10, "user:u": 20}, {}, {"k": 6}], 1)
    ]
    for event in events:
        results.append((await sessions.append_event(created, event)).actions.state_delta)
    results.append((await sessions.append_event(created, events[-1].model_copy(deep=True))).id)  # a repeat is ignored
    for config in [
        None,
        GetSessionConfig(num_recent_events=0),
        GetSessionConfig(num_recent_events=2),
        GetSessionConfig(after_timestamp=events[2].timestamp),
    ]:
        results.append(_seen(await sessions.get_session(app_name=APP, user_id=USER, session_id="s1", config=config)))
    results.append([_seen(s) for s in (await sessions.list_sessions(app_name=APP)).sessions])
    results.append([_seen(s) for s in (await sessions.list_sessions(app_name=APP, user_id="bob")).sessions])
    results.append([_seen(s) for s in (await sessions.list_sessions(app_name="other")).sessions])
    results.append(await sessions.get_user_state(app_name=APP, user_id=USER))
    results.append(_seen(await sessions.get_session(app_name=APP, user_id=USER, session_id="nope")))
    await sessions.delete_session(app_name=APP, user_id=USER, session_id="s1")
    await sessions.delete_session(app_name=APP, user_id=USER, session_id="s1")  # deleting a missing session is no error
    results.append(_seen(await sessions.get_session(app_name=APP, user_id=USER, session_id="s1")))
    results.append(await _outcome(sessions.append_event(created, Event(id="late", author="agent"))))
    results.append([_seen(s) for s in (await sessions.list_sessions(app_name=APP)).sessions])
    return results


async def _artifact_calls(artifacts: BaseArtifactService) -> list[Any]:
    results: list[Any] = []

    def version_seen(record: Any) -> Any:
        return None if record is None else (record.version, record.mime_type, record.custom_metadata)

    scope: dict[str, Any] = {"app_name": APP, "user_id": USER}
    blob = types.Part.from_bytes(data=b"\x00\xff" * 5000, mime_type="image/png")
    for filename, part, session_id, metadata in [
        ("a.txt", types.Part(text="one"), "s1", None),
        ("a.txt", types.Part(text="two"), "s1", {"why": "edit"}),
        ("a.txt", blob, "s1", None),
        ("user:profile.png", blob, None, None),
        ("user:profile.png", types.Part(text="x"), "s1", None),
        ("b.txt", types.Part(text="other session"), "s2", None),
    ]:
        results.append(
            await artifacts.save_artifact(**scope, filename=filename, artifact=part, session_id=session_id, custom_metadata=metadata)
        )
    results.append(await _outcome(artifacts.save_artifact(**scope, filename="c.txt", artifact=types.Part(text="no session"))))
    results.append(await _outcome(artifacts.save_artifact(**scope, filename="c.txt", artifact=types.Part(), session_id="s1")))
    for version in [None, 0, 1, 2, 3, -1]:
        results.append(await artifacts.load_artifact(**scope, filename="a.txt", session_id="s1", version=version))
    results.append(await artifacts.load_artifact(**scope, filename="user:profile.png", version=0))
    results.append(await artifacts.load_artifact(**scope, filename="a.txt", session_id="s2"))
    for session_id in ["s1", "s2", None]:
        results.append(await artifacts.list_artifact_keys(**scope, session_id=session_id))
    results.append(await artifacts.list_versions(**scope, filename="a.txt", session_id="s1"))
    results.append([version_seen(v) for v in await artifacts.list_artifact_versions(**scope, filename="a.txt", session_id="s1")])
    for version in [None, 1, 7]:
        results.append(version_seen(await artifacts.get_artifact_version(**scope, filename="a.txt", session_id="s1", version=version)))
    await artifacts.delete_artifact(**scope, filename="a.txt", session_id="s1")
    results.append(await artifacts.list_versions(**scope, filename="a.txt", session_id="s1"))
    results.append(await artifacts.load_artifact(**scope, filename="a.txt", session_id="s1"))
    results.append(await artifacts.save_artifact(**scope, filename="a.txt", artifact=types.Part(text="again"), session_id="s1"))
    results.append(await artifacts.list_artifact_keys(**scope, session_id="s1"))
    results.append(await _outcome(artifacts.list_artifact_keys(app_name="../x", user_id=USER)))
    return results


class AdkServiceConformance:
    """Each session and artifact call answers as ADK's in-memory services do (see the module's docstring)."""

    def make_session_service(self, tmp_path: Path) -> BaseSessionService:
        raise NotImplementedError

    def make_artifact_service(self, tmp_path: Path) -> BaseArtifactService:
        raise NotImplementedError

    def test_each_session_call_answers_as_in_memory_session_service(self, tmp_path: Path) -> None:
        service = self.make_session_service(tmp_path)
        ours, theirs = asyncio.run(_session_calls(service)), asyncio.run(_session_calls(InMemorySessionService()))
        for index, (mine, adks) in enumerate(zip(ours, theirs, strict=True)):
            assert mine == adks, f"call {index}"

    def test_each_artifact_call_answers_as_in_memory_artifact_service(self, tmp_path: Path) -> None:
        service = self.make_artifact_service(tmp_path)
        ours, theirs = asyncio.run(_artifact_calls(service)), asyncio.run(_artifact_calls(InMemoryArtifactService()))
        for index, (mine, adks) in enumerate(zip(ours, theirs, strict=True)):
            assert mine == adks, f"call {index}"
