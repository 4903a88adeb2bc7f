"""ADK sessions as each event one checkpoint, read back by one sweep of the run: a session written by the earlier
layout (every checkpoint the whole events list) reads, grows and forks; a fork at an event in the middle; a second
service reading what another appended. Answers are compared with ADK's InMemorySessionService fed the same calls.

tests/data/adk_layout1 is a store the earlier layout wrote (commit f4f65c2) with `feed` and `fork_old`:
    PYTHONPATH=<tree at f4f65c2> python -c "import asyncio, tests.integrations.test_adk_layouts as t; \
        asyncio.run(t.make_old_store('tests/data/adk_layout1'))"
(the store's locks/, tmp/ and remotes/ left out).
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("google.adk")

from google.adk.errors._stale_session_error import StaleSessionError
from google.adk.events import Event, EventActions
from google.adk.sessions import InMemorySessionService
from google.adk.sessions.base_session_service import BaseSessionService, GetSessionConfig
from google.genai import types

import agentfs
from agentfs.integrations.adk import AgentFSSessionService
from agentfs.integrations.adk.events import MAX_FORK_HOPS

APP = "shop"
OLD_STORE = Path(__file__).parents[1] / "data" / "adk_layout1"
SESSIONS = [("ada", "old"), ("ada@example.com", "old chat")]  # plain segments, then hashed ones (ids kept in metadata)
BASE_TIME = 2_000_000_000.0  # after any session's creation time, so the stale-session check never fires on these events
DELTAS: list[dict[str, Any]] = [{"k": 1}, {"app:seen": 1, "temp:t": 1}, {}, {"user:last": 3, "k": 3}, {"k": 4}, {}]


def make_events(tag: str, count: int, start: int = 0) -> list[Event]:
    """`count` events with fixed ids and times, their state deltas in every scope."""
    return [
        Event(
            id=f"{tag}-e{n}",
            invocation_id=f"{tag}-i{n // 2}",
            author="user" if n % 2 == 0 else "agent",
            timestamp=BASE_TIME + n,
            content=types.Content(role="user" if n % 2 == 0 else "model", parts=[types.Part(text=f"{tag} says {n}")]),
            actions=EventActions(state_delta=DELTAS[n % len(DELTAS)]),
        )
        for n in range(start, start + count)
    ]


async def feed(service: BaseSessionService, count: int = 6) -> None:
    """Each session of SESSIONS created with state in every scope, then `count` events."""
    for user, session_id in SESSIONS:
        session = await service.create_session(app_name=APP, user_id=user, session_id=session_id, state={"k": 0, "app:a": 1, "user:u": 2})
        for event in make_events(user, count):
            await service.append_event(session, event)


async def fork_old(service: AgentFSSessionService) -> None:
    """ada's session forked at its third event, and one event appended to the fork."""
    fork = await service.fork_session(app_name=APP, user_id="ada", session_id="old", new_session_id="old-fork", at_event_id="ada-e2")
    await service.append_event(fork, make_events("fork", 1, start=10)[0])


async def make_old_store(path: str) -> None:
    with agentfs.open(path, durability="process") as store:
        service = AgentFSSessionService(store)
        await feed(service)
        await fork_old(service)


def _seen(session: Any) -> Any:
    """What a session holds, times included (the events' are fixed)."""
    assert session is not None
    return (session.user_id, session.id, session.state, session.last_update_time, [e.model_dump() for e in session.events])


async def _sessions(service: BaseSessionService, ids: list[tuple[str, str]]) -> list[Any]:
    return [_seen(await service.get_session(app_name=APP, user_id=user, session_id=session_id)) for user, session_id in ids]


async def _listed(service: BaseSessionService) -> list[Any]:
    listed = (await service.list_sessions(app_name=APP)).sessions
    return sorted((s.user_id, s.id, s.state, s.last_update_time, s.events) for s in listed)


async def _grow(service: BaseSessionService, ids: list[tuple[str, str]], start: int) -> None:
    for user, session_id in ids:
        session = await service.get_session(app_name=APP, user_id=user, session_id=session_id)
        assert session is not None
        for event in make_events(f"{user}/{session_id}", 3, start):
            await service.append_event(session, event)


def test_a_session_written_whole_reads_grows_and_forks_as_in_memory_service(tmp_path: Path) -> None:
    shutil.copytree(OLD_STORE, tmp_path / "s")
    store = agentfs.open(tmp_path / "s", durability="process")
    ours = AgentFSSessionService(store)
    old_run = ours.run(APP, "ada", "old")
    assert all(cp.has_value("events") for cp in old_run.history())  # really the earlier layout: a whole list each
    every = [*SESSIONS, ("ada", "old-fork")]

    async def check() -> None:
        reference = InMemorySessionService()
        await feed(reference)
        fork = await reference.create_session(app_name=APP, user_id="ada", session_id="old-fork", state={"k": 0})
        for event in [*make_events("ada", 3), *make_events("fork", 1, start=10)]:  # the fork's events, as the fork saw them
            await reference.append_event(fork, event)
        assert await _sessions(ours, every) == await _sessions(reference, every)
        assert await _listed(ours) == await _listed(reference)
        for service in (ours, reference):  # grow each: single events after the whole lists
            await _grow(service, every, start=20)
        grown = await _sessions(reference, every)
        assert await _sessions(ours, every) == grown
        assert await _sessions(AgentFSSessionService(store), every) == grown  # read from the store, not this service's logs
        assert await _listed(ours) == await _listed(reference)
        head = old_run.latest()
        assert head is not None and head.value_keys() == ["event", "state"] and head.metadata == {"last_update_time": BASE_TIME + 22}

        # forks at an event the earlier layout wrote: in the session, and in the old fork before its fork point (found in its source)
        ada = grown[0][4]
        in_session = await ours.fork_session(app_name=APP, user_id="ada", session_id="old", new_session_id="f1", at_event_id="ada-e3")
        assert [e.model_dump() for e in in_session.events] == ada[:4] and in_session.state["k"] == 3
        before_fork = await ours.fork_session(app_name=APP, user_id="ada", session_id="old-fork", new_session_id="f2", at_event_id="ada-e1")
        assert [e.model_dump() for e in before_fork.events] == ada[:2] and before_fork.state["k"] == 1
        assert store.verify().ok

    asyncio.run(check())
    store.close()


def test_a_fork_in_the_middle_holds_the_events_up_to_it_and_its_own_after(tmp_path: Path) -> None:
    store = agentfs.open(tmp_path / "s")
    service = AgentFSSessionService(store)

    async def check() -> None:
        session = await service.create_session(app_name=APP, user_id="ada", session_id="s", state={"k": 0})
        events = make_events("s", 6)
        for event in events:
            await service.append_event(session, event)
        fork = await service.fork_session(app_name=APP, user_id="ada", session_id="s", new_session_id="f", at_event_id="s-e3")
        assert [e.id for e in fork.events] == ["s-e0", "s-e1", "s-e2", "s-e3"] and fork.state["k"] == 3
        for event in make_events("f", 2, start=10):
            await service.append_event(fork, event)
        await service.append_event(session, make_events("s", 1, start=6)[0])
        # a fork of the fork at an event before its fork point: taken from the source, where that event's checkpoint is
        await service.fork_session(app_name=APP, user_id="ada", session_id="f", new_session_id="g", at_event_id="s-e1")
        source, deeper = service.run(APP, "ada", "s"), service.run(APP, "ada", "g")
        assert deeper.get(deeper.ids()[0]).forked_from == (source.name, source.ids()[2])  # the creation, s-e0, then s-e1
        for reader in (service, AgentFSSessionService(store)):  # this service's logs, and a fresh read of each run
            got = {sid: await reader.get_session(app_name=APP, user_id="ada", session_id=sid) for sid in ("s", "f", "g")}
            assert [e.id for e in got["s"].events] == [f"s-e{n}" for n in range(7)]
            assert [e.id for e in got["f"].events] == ["s-e0", "s-e1", "s-e2", "s-e3", "f-e10", "f-e11"]
            assert [e.id for e in got["g"].events] == ["s-e0", "s-e1"] and got["g"].state["k"] == 1
            assert got["f"].state["k"] == 4 and got["s"].state["k"] == 1  # f-e10's delta; s-e6's
        await service.delete_session(app_name=APP, user_id="ada", session_id="s")
        again = await AgentFSSessionService(store).get_session(app_name=APP, user_id="ada", session_id="f")
        assert again is not None and [e.id for e in again.events] == ["s-e0", "s-e1", "s-e2", "s-e3", "f-e10", "f-e11"]  # its own list

    asyncio.run(check())
    store.close()


def test_a_fork_cut_short_before_its_list_continues_its_source(tmp_path: Path) -> None:
    """A crash between the fork and the fork's first commit leaves a run of one borrowed checkpoint: its events are the
    source's up to there."""
    store = agentfs.open(tmp_path / "s")
    service = AgentFSSessionService(store)

    async def check() -> None:
        session = await service.create_session(app_name=APP, user_id="ada", session_id="s")
        for event in make_events("s", 4):
            await service.append_event(session, event)
        source = service.run(APP, "ada", "s")
        source.fork(source.ids()[3], service.run(APP, "ada", "cut").name)  # ends with s-e2
        cut = await AgentFSSessionService(store).get_session(app_name=APP, user_id="ada", session_id="cut")
        assert cut is not None and [e.id for e in cut.events] == ["s-e0", "s-e1", "s-e2"]

    asyncio.run(check())
    store.close()


def test_a_chain_of_forks_cut_short_is_refused_past_its_bound(tmp_path: Path) -> None:
    """Each run the fork of the one before, cut short (its one checkpoint borrowed): a reader follows them back by
    recursing, so past MAX_FORK_HOPS of them the session is refused by name (without the bound a reader recursed as
    deep as the chain is long, and through a cycle, which only crafted bytes make, until RecursionError). Up to the
    bound they read as the first run's events."""
    store = agentfs.open(tmp_path / "s", durability="process")
    service = AgentFSSessionService(store)

    async def check() -> None:
        session = await service.create_session(app_name=APP, user_id="ada", session_id="s")
        for event in make_events("s", 2):
            await service.append_event(session, event)
        run = service.run(APP, "ada", "s")
        for number in range(300):
            run = run.fork(run.ids()[-1], service.run(APP, "ada", f"c{number}").name)
        near = await AgentFSSessionService(store).get_session(app_name=APP, user_id="ada", session_id=f"c{MAX_FORK_HOPS - 2}")
        assert near is not None and [e.id for e in near.events] == ["s-e0", "s-e1"]
        with pytest.raises(agentfs.FormatError, match=f"past {MAX_FORK_HOPS} runs in a row"):
            await AgentFSSessionService(store).get_session(app_name=APP, user_id="ada", session_id="c299")

    asyncio.run(check())
    store.close()


def test_a_second_service_reads_what_another_appended(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = agentfs.open(tmp_path / "s")
    one, two = AgentFSSessionService(store), AgentFSSessionService(store)
    swept: list[int] = []  # the checkpoints each sweep read
    get_many = agentfs.Run.get_many
    monkeypatch.setattr(agentfs.Run, "get_many", lambda run, ids: swept.append(len(ids)) or get_many(run, ids))

    async def check() -> None:
        events = make_events("s", 8)
        mine = await one.create_session(app_name=APP, user_id="ada", session_id="s", state={"k": 0})
        for event in events[:3]:
            await one.append_event(mine, event)
        assert swept == []  # its own appends extend what it knew: nothing read back
        theirs = await two.get_session(app_name=APP, user_id="ada", session_id="s")
        assert theirs is not None and [e.id for e in theirs.events] == ["s-e0", "s-e1", "s-e2"] and swept == [4]
        for event in events[3:5]:
            await one.append_event(mine, event)
        again = await two.get_session(app_name=APP, user_id="ada", session_id="s")
        assert again is not None and [e.id for e in again.events] == [f"s-e{n}" for n in range(5)] and again.state["k"] == 4
        assert swept == [4, 2]  # only the two checkpoints appended since
        with pytest.raises(StaleSessionError):
            await two.append_event(theirs, events[5])  # its copy is behind what one appended
        await two.append_event(again, events[5])
        await two.append_event(again, events[4].model_copy(deep=True))  # a repeated event id is ignored
        with pytest.raises(StaleSessionError):
            await one.append_event(mine, events[6])
        latest = await one.get_session(app_name=APP, user_id="ada", session_id="s")
        assert latest is not None and [e.id for e in latest.events] == [f"s-e{n}" for n in range(6)]
        await one.append_event(latest, events[6])
        final = await two.get_session(app_name=APP, user_id="ada", session_id="s", config=GetSessionConfig(num_recent_events=2))
        assert final is not None and [e.id for e in final.events] == ["s-e5", "s-e6"]

    asyncio.run(check())
    store.close()


def test_each_append_stores_its_event_and_refers_to_an_unchanged_state(tmp_path: Path) -> None:
    store = agentfs.open(tmp_path / "s")
    service = AgentFSSessionService(store)
    big = {"notes": "x" * 500}  # packed in the entry, not inline in the manifest

    async def check() -> None:
        session = await service.create_session(app_name=APP, user_id="ada@example.com", session_id="s", state=big)
        for event in make_events("s", 3, start=1):  # the session state changes at the third (k), not before (app:, temp:, none)
            await service.append_event(session, event)

    asyncio.run(check())
    run = service.run(APP, "ada@example.com", "s")
    created, *appended = run.get_many(run.ids())
    assert created.state == {"events": [], "state": big}
    assert [cp.value_keys() for cp in appended] == [["event", "state"]] * 3
    assert appended[0].manifest.state["state"].blob.entry == created.address  # the creation's value, not stored again
    assert appended[1].manifest.state["state"].blob.entry == created.address
    assert appended[2].manifest.state["state"].blob.entry is None and appended[2].value("state") == {**big, "k": 3}
    assert [cp.metadata for cp in appended] == [{"last_update_time": BASE_TIME + n, "user_id": "ada@example.com"} for n in (1, 2, 3)]
    store.close()


def test_a_store_wide_retention_policy_keeps_every_event(tmp_path: Path) -> None:
    store = agentfs.open(tmp_path / "s")
    service = AgentFSSessionService(store)
    asyncio.run(feed(service))
    store.run("other").commit({"n": 1})
    store.run("other").commit({"n": 2})
    store.set_retention(keep_last=1)
    store.gc(grace=0)
    assert len(store.run("other").ids()) == 1  # the policy applies elsewhere
    session = asyncio.run(AgentFSSessionService(store).get_session(app_name=APP, user_id="ada", session_id="old"))
    assert session is not None and [e.id for e in session.events] == [f"ada-e{n}" for n in range(6)]
    store.close()


def test_what_get_session_returns_is_the_callers_to_change(tmp_path: Path) -> None:
    store = agentfs.open(tmp_path / "s")
    service = AgentFSSessionService(store)

    async def check() -> None:
        session = await service.create_session(app_name=APP, user_id="ada", session_id="s", state={"plan": {"steps": [1]}})
        call = types.FunctionCall(id="c", name="search", args={"query": {"words": ["a"]}})
        await service.append_event(
            session, Event(author="agent", content=types.Content(role="model", parts=[types.Part(function_call=call)]))
        )
        got = await service.get_session(app_name=APP, user_id="ada", session_id="s")
        assert got is not None
        got.events[0].content.parts[0].function_call.args["query"]["words"].append("b")  # type: ignore[union-attr,index]
        got.state["plan"]["steps"].append(2)
        again = await service.get_session(app_name=APP, user_id="ada", session_id="s")
        assert again is not None and again.events[0].content.parts[0].function_call.args == {"query": {"words": ["a"]}}  # type: ignore[union-attr]
        assert again.state["plan"] == {"steps": [1]}

    asyncio.run(check())
    store.close()


def test_an_encrypted_session_names_nothing_and_reads_back(tmp_path: Path) -> None:
    root = tmp_path / "s"

    async def write() -> None:
        service = AgentFSSessionService(root, encryption="correct horse")
        await feed(service)
        await service.close()

    asyncio.run(write())
    every_byte = b"".join(path.read_bytes() for path in root.rglob("*") if path.is_file())
    assert b"ada says" not in every_byte and b"ada@example.com" not in every_byte

    async def read() -> list[str]:
        service = AgentFSSessionService(root, encryption="correct horse")
        session = await service.get_session(app_name=APP, user_id="ada@example.com", session_id="old chat")
        await service.close()
        assert session is not None
        return [e.id for e in session.events]

    assert asyncio.run(read()) == [f"ada@example.com-e{n}" for n in range(6)]


def test_the_sessions_kept_read_are_bounded_by_their_events(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from agentfs.integrations.adk import events as session_events

    monkeypatch.setattr(session_events, "RECENT_EVENTS", 10)
    store = agentfs.open(tmp_path / "s")
    writer, reader = AgentFSSessionService(store), AgentFSSessionService(store)
    asyncio.run(feed(writer))  # two sessions of 6 events: both together are past the bound
    swept: list[int] = []
    get_many = agentfs.Run.get_many
    monkeypatch.setattr(agentfs.Run, "get_many", lambda run, ids: swept.append(len(ids)) or get_many(run, ids))

    async def read(user: str, session_id: str) -> None:
        assert await reader.get_session(app_name=APP, user_id=user, session_id=session_id) is not None

    for user, session_id in [*SESSIONS, SESSIONS[1], SESSIONS[0]]:
        asyncio.run(read(user, session_id))
    assert swept == [7, 7, 7]  # the second kept, the first read again: one session's events fit
    store.close()
