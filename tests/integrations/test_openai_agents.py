"""AgentFSSession under the OpenAI Agents SDK's own Runner, with the SDK's ScriptedModel (no network):
the same history as the SDK's SQLiteSession, every change a checkpoint, resumed on another machine
through a file and an S3 (moto) remote, branches as forks, several writers, linear storage.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import random
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents")

import msgpack
from agents import Agent, Runner, function_tool, set_tracing_disabled
from agents.memory import Session, SessionSettings, SQLiteSession
from agents.testing import ScriptedModel, assistant_message, function_call

import agentfs
from agentfs.aio import WORKERS
from agentfs.integrations.openai_agents import AgentFSSession, BranchError
from tests.helpers import raw
from tests.servers import RemoteSpec, make_file_spec, make_s3_spec

set_tracing_disabled(True)  # no trace export: nothing leaves the machine
QUESTIONS = ["hi", "weather in Paris?", "thanks"]


@function_tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


def _script() -> list[Any]:
    """The model's answers to QUESTIONS: the second one calls the tool, then answers."""
    return [
        [assistant_message("hello")],
        [function_call("get_weather", {"city": "Paris"}, call_id="call")],
        [assistant_message("It is sunny in Paris")],
        [assistant_message("bye")],
    ]


async def _converse(session: Session, model: ScriptedModel, questions: list[str]) -> list[str]:
    agent = Agent(name="assistant", model=model, tools=[get_weather])
    return [str((await Runner.run(agent, question, session=session)).final_output) for question in questions]


def _ask(method: str, agent: Agent[Any], question: str, session: Session) -> str:
    """One turn through the Runner's `run`, `run_sync` (its own event loop) or `run_streamed`."""
    if method == "run_sync":
        return str(Runner.run_sync(agent, question, session=session).final_output)

    async def streamed() -> Any:
        result = Runner.run_streamed(agent, question, session=session)
        async for _event in result.stream_events():
            pass
        return result.final_output

    if method == "run_streamed":
        return str(asyncio.run(streamed()))
    return str(asyncio.run(Runner.run(agent, question, session=session)).final_output)


def _open(path: Path, **options: Any) -> AgentFSSession:
    return AgentFSSession("chat", path, **options)


@pytest.mark.parametrize("method", ["run", "run_sync", "run_streamed"])
def test_the_runner_keeps_the_same_history_as_sqlite_session_and_each_change_is_a_checkpoint(method: str, tmp_path: Path) -> None:
    session = _open(tmp_path / "store")
    assert isinstance(session, Session)
    reference = SQLiteSession("chat")
    model = ScriptedModel(_script())
    agent = Agent(name="assistant", model=model, tools=[get_weather])
    answers = []
    heads = []
    for question in QUESTIONS:
        answers.append(_ask(method, agent, question, session))
        heads.append(session.run.head_id())
    assert answers == ["hello", "It is sunny in Paris", "bye"]
    assert asyncio.run(_converse(reference, ScriptedModel(_script()), QUESTIONS)) == answers
    items = asyncio.run(session.get_items())
    assert items == asyncio.run(reference.get_items())
    kinds = [item.get("type") for item in items if "type" in item]
    assert kinds == ["message", "function_call", "function_call_output", "message", "message"]
    # the model saw the earlier turns: the last call's input is the whole history before its answer
    assert model.last_call is not None and model.last_call.input == items[:-1]
    # every add_items was one checkpoint, each holding the items so far
    history = session.run.history()[::-1]
    assert len(set(heads)) == len(QUESTIONS) and heads[-1] == history[-1].id
    states = [[item for _added, item in cp.state["items"]] for cp in history]
    assert all(later[: len(earlier)] == earlier and len(later) > len(earlier) for earlier, later in itertools.pairwise(states))
    assert {cp.metadata["operation"] for cp in history} == {"add_items"} and history[-1].metadata["turns"] == len(QUESTIONS)
    assert session.store.verify().ok


def test_the_protocol_behaves_as_sqlite_session(tmp_path: Path) -> None:
    """The same calls on both sessions give the same answers: limits, pop, clear, settings."""

    async def calls(session: Any) -> list[Any]:
        out: list[Any] = [await session.pop_item(), await session.get_items()]  # empty: None, []
        await session.add_items([{"role": "user", "content": f"m{i}"} for i in range(5)])
        await session.add_items([])
        out += [await session.get_items(limit=limit) for limit in (None, 0, 2, 5, 9, -1)]
        out += [await session.pop_item(), await session.pop_item(), await session.get_items()]
        session.session_settings = SessionSettings(limit=2)
        out += [await session.get_items(), await session.get_items(limit=3)]
        await session.clear_session()
        out += [await session.get_items(), await session.pop_item()]
        await session.add_items([{"role": "user", "content": "again"}])
        return [*out, await session.get_items()]

    session = AgentFSSession("s", tmp_path / "store", session_settings={"limit": None})
    assert asyncio.run(calls(session)) == asyncio.run(calls(SQLiteSession("s")))
    operations = [cp.metadata["operation"] for cp in session.run.history()[::-1]]
    assert operations == ["add_items", "pop_item", "pop_item", "clear_session", "add_items"]  # no checkpoint for a no-op


@pytest.mark.parametrize("kind", ["file", "s3"])
def test_resume_on_another_machine_through_the_remote(kind: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    spec: RemoteSpec = make_file_spec(tmp_path) if kind == "file" else make_s3_spec(request.getfixturevalue("moto_server"))
    remote = {"remote": spec.url, "storage_options": spec.storage_options}
    with agentfs.open(tmp_path / "machine-a") as here:
        session = AgentFSSession("chat", here)
        asyncio.run(_converse(session, ScriptedModel(_script()), QUESTIONS[:2]))
        items_a = asyncio.run(session.get_items())
        asyncio.run(session.create_branch_from_turn(2, "retry"))
        with here.sync(spec.url, storage_options=spec.storage_options) as daemon:
            assert daemon.flush(timeout=60)

    there = AgentFSSession("chat", tmp_path / "machine-b", **remote)
    assert asyncio.run(there.get_items()) == items_a
    assert {branch["branch_id"] for branch in asyncio.run(there.list_branches())} == {"main", "retry"}
    assert asyncio.run(there.get_items(branch_id="retry")) == items_a[:2]
    model = ScriptedModel(_script()[3:])
    assert asyncio.run(_converse(there, model, QUESTIONS[2:])) == ["bye"]
    assert model.last_call is not None and model.last_call.input == [*items_a, {"content": "thanks", "role": "user"}]
    items_b = asyncio.run(there.get_items())
    assert items_b[: len(items_a)] == items_a and len(items_b) == len(items_a) + 2
    with there.store.sync(spec.url, storage_options=spec.storage_options) as daemon:
        assert daemon.flush(timeout=60)
    assert there.store.verify().ok
    there.close()

    back = AgentFSSession("chat", tmp_path / "machine-a", **remote)  # machine A again, now with the remote
    assert asyncio.run(back.get_items()) == items_b
    back.close()


def test_a_branch_from_a_turn_is_a_fork_and_leaves_main_alone(tmp_path: Path) -> None:
    session = _open(tmp_path / "store")
    asyncio.run(_converse(session, ScriptedModel(_script()), QUESTIONS))
    main_items = asyncio.run(session.get_items())
    turns = asyncio.run(session.get_conversation_turns())
    assert [(turn["turn"], turn["full_content"]) for turn in turns] == list(enumerate(QUESTIONS, 1))

    name = asyncio.run(session.create_branch_from_turn(2, "other-question"))
    assert name == session.current_branch == "other-question"
    assert asyncio.run(session.get_items()) == main_items[:2]  # the items before turn 2's user message
    first = session.run.history()[-1]
    assert first.forked_from is not None and first.forked_from[0] == "openai-agents/chat/main"  # run.fork: nothing copied
    source = session.store.run(first.forked_from[0]).get(first.forked_from[1])
    assert [item for _added, item in source.state["items"]] == main_items[:2]  # the checkpoint right before turn 2
    assert asyncio.run(_converse(session, ScriptedModel([[assistant_message("cloudy")]]), ["weather in Oslo?"])) == ["cloudy"]
    assert asyncio.run(session.get_items(branch_id="main")) == main_items

    branches = {b["branch_id"]: b for b in asyncio.run(session.list_branches())}
    assert set(branches) == {"main", "other-question"} and branches["other-question"]["is_current"]
    assert (branches["main"]["message_count"], branches["main"]["user_turns"]) == (len(main_items), 3)
    assert (branches["other-question"]["message_count"], branches["other-question"]["user_turns"]) == (4, 2)

    asyncio.run(session.switch_to_branch("main"))
    assert asyncio.run(session.find_turns_by_content("PARIS"))[0]["turn"] == 2
    auto = asyncio.run(session.create_branch_from_content("thanks"))
    assert auto.startswith("branch_from_turn_3_") and asyncio.run(session.get_items()) == main_items[:-2]
    for wrong, message in [
        (lambda: session.create_branch_from_turn(9), "turn 9 does not contain a user message"),
        (lambda: session.create_branch_from_turn(1, "other-question"), "'other-question' has already been used"),
        (lambda: session.create_branch_from_turn(1, " "), "cannot be empty"),
        (lambda: session.switch_to_branch("nowhere"), "'nowhere' does not exist"),
        (lambda: session.delete_branch("main"), "cannot be deleted"),
        (lambda: session.delete_branch(auto), "is the current branch"),
    ]:
        with pytest.raises(BranchError, match=message) as raised:
            asyncio.run(wrong())
        assert isinstance(raised.value, (agentfs.AgentFSError, ValueError))
    asyncio.run(session.delete_branch(auto, force=True))
    assert session.current_branch == "main" and asyncio.run(session.get_items(branch_id=auto)) == []
    assert {b["branch_id"] for b in asyncio.run(session.list_branches())} == {"main", "other-question"}
    asyncio.run(session.clear_session())
    assert asyncio.run(session.list_branches()) == [] and asyncio.run(session.get_items(branch_id="other-question")) == []
    assert session.store.verify().ok


def test_a_branch_after_the_turn_checkpoint_was_pruned_forks_the_head_and_commits_the_prefix(tmp_path: Path) -> None:
    session = _open(tmp_path / "store")
    asyncio.run(_converse(session, ScriptedModel(_script()), QUESTIONS))
    main_items = asyncio.run(session.get_items())
    head = session.run.head_id()
    session.run.prune(keep_last=1)  # the checkpoint before turn 2 is gone
    asyncio.run(session.create_branch_from_turn(2, "late"))
    assert asyncio.run(session.get_items()) == main_items[:2]
    forked, created = session.run.history()[::-1]
    assert forked.forked_from == ("openai-agents/chat/main", head) and created.metadata["operation"] == "create_branch"
    assert session.store.verify().ok


def test_odd_session_ids_get_their_own_runs(tmp_path: Path) -> None:
    with agentfs.open(tmp_path / "store") as store:
        ids = ["user 1/chat", "log", "..", "h" + "0" * 64, "ü" * 200]
        for number, session_id in enumerate(ids):
            asyncio.run(AgentFSSession(session_id, store).add_items([{"role": "user", "content": str(number)}]))
        for number, session_id in enumerate(ids):
            assert asyncio.run(AgentFSSession(session_id, store).get_items()) == [{"role": "user", "content": str(number)}]
        assert len(store.runs()) == len(ids)


WRITER = """
import asyncio, os, sys, time
from agentfs.integrations.openai_agents import AgentFSSession

async def main():
    session = AgentFSSession("shared", sys.argv[1])
    open(sys.argv[4] + "." + sys.argv[2], "w").close()  # ready
    while not os.path.exists(sys.argv[4]):  # start together, so that the appends overlap
        time.sleep(0.01)
    for i in range(int(sys.argv[3])):
        await session.add_items([{"role": "user", "content": f"{sys.argv[2]}:{i}"}])

asyncio.run(main())
"""


def test_two_processes_appending_to_one_session_lose_nothing(tmp_path: Path) -> None:
    count = 15
    go = tmp_path / "go"
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(tmp_path / "store"), name, str(count), str(go)]) for name in "ab"]
    while not all(Path(f"{go}.{name}").exists() for name in "ab"):
        time.sleep(0.01)
    go.touch()
    assert [writer.wait(timeout=120) for writer in writers] == [0, 0]
    contents = [item["content"] for item in asyncio.run(AgentFSSession("shared", tmp_path / "store").get_items())]
    print("appended in the order", " ".join(contents))
    for name in "ab":
        assert [c for c in contents if c.startswith(name)] == [f"{name}:{i}" for i in range(count)]
    assert len(contents) == 2 * count


def test_changes_of_one_session_object_from_concurrent_tasks_keep_every_item(tmp_path: Path) -> None:
    """Tasks adding and popping at once on one object (its changes on several threads, retried on Conflict): nothing
    lost or doubled, and each checkpoint's counts are its own items'."""
    session = _open(tmp_path / "store")

    async def scenario() -> None:
        await session.add_items([{"role": "user", "content": "first"}])
        for round_ in range(6):
            turns = [[{"role": "user", "content": f"{round_}:{i}"}, {"role": "assistant", "content": "ok"}] for i in range(6)]
            await asyncio.gather(*map(session.add_items, turns), session.pop_item())

    asyncio.run(scenario())
    items = asyncio.run(session.get_items())
    assert len(items) == 1 + 6 * (2 * 6 - 1), "an item was lost or doubled"
    users = sorted(item["content"] for item in items if item["role"] == "user")
    assert users == sorted(["first"] + [f"{r}:{i}" for r in range(6) for i in range(6)])
    for checkpoint in session.run.history():
        state = checkpoint.state["items"]
        assert checkpoint.metadata["items"] == len(state), f"{checkpoint.metadata['operation']}: its item count is not its items'"
        assert checkpoint.metadata["turns"] == sum(1 for _added, item in state if item["role"] == "user")


def test_items_changed_by_their_caller_after_add_items_stay_as_added(tmp_path: Path) -> None:
    """The session keeps its own copy of the items it committed: a caller's later change of its dicts reaches no checkpoint."""
    session = _open(tmp_path / "store")
    first, second = {"role": "user", "content": "as added"}, {"role": "assistant", "content": "popped"}

    async def scenario() -> None:
        await session.add_items([first, second])
        first["content"] = "changed by the caller"
        await session.pop_item()  # commits the items before the last one: the session's own copy of the first

    asyncio.run(scenario())
    assert asyncio.run(session.get_items()) == [{"role": "user", "content": "as added"}]


def test_an_item_the_store_cannot_hold_is_refused_by_add_items_by_its_path(tmp_path: Path) -> None:
    session = _open(tmp_path / "store")
    with pytest.raises(agentfs.SerializationError, match=r"items\[1\]\[\"content\"\] is a builtins.object"):
        asyncio.run(session.add_items([{"role": "user", "content": "fine"}, {"role": "user", "content": object()}]))
    assert session.run.head_id() is None


TURNS = int(os.environ.get("AGENTFS_OPENAI_TURNS", "200"))


def _turn(rng: random.Random, words: list[str], i: int) -> tuple[list[Any], list[Any]]:
    """One Runner turn's items, as the SDK saves them: the user's message, then the tool call, its output, the answer."""

    def text(size: int) -> str:
        out: list[str] = []
        while sum(len(word) + 1 for word in out) < size:
            out.append(rng.choice(words))
        return " ".join(out)

    arguments = json.dumps({"q": text(30)})
    answer = {"type": "output_text", "text": text(250), "annotations": []}
    return [{"role": "user", "content": text(150)}], [
        {"type": "function_call", "call_id": f"call_{i}", "name": "search", "arguments": arguments, "id": f"fc_{i}"},
        {"type": "function_call_output", "call_id": f"call_{i}", "output": text(200)},
        {"id": f"msg_{i}", "type": "message", "role": "assistant", "status": "completed", "content": [answer]},
    ]


def test_a_long_session_grows_linearly(tmp_path: Path) -> None:
    """Bytes on disk stay under 10x the final item list, and the second half of the turns costs what the first did."""
    rng = random.Random(3)
    words = sorted({"".join(rng.choice("etaoinshrdlcumwfgypbvkjxqz") for _ in range(rng.randint(2, 10))) for _ in range(1500)})
    session = _open(tmp_path / "store", durability="process")
    stored = {}

    async def talk() -> None:
        for i in range(TURNS):
            for items in _turn(rng, words, i):
                await session.add_items(items)
            if i + 1 in (TURNS // 2, TURNS):
                stored[i + 1] = raw.stored_size(tmp_path / "store")

    asyncio.run(talk())
    final = len(msgpack.packb(asyncio.run(session.get_items())))
    first, whole = stored[TURNS // 2], stored[TURNS]
    print(f"{TURNS} turns: final items {final} B, objects/ + runs/ {whole} B = {whole / final:.2f}x")
    print(f"the second half of the turns added {(whole - first) / first:.2f}x what the first half did")
    assert whole < 10 * final, f"{whole / final:.1f}x the final item list"
    # linear: the second half costs about what the first did (a layout that rewrote the list would cost 3x)
    assert whole - first < 2 * first, "the second half of the turns cost twice the first: growth is not linear"


def test_the_loop_keeps_running_during_a_change_and_a_cancelled_change_has_landed_when_the_caller_hears(tmp_path: Path) -> None:
    session = _open(tmp_path / "store")
    large = {"role": "user", "content": random.Random(1).randbytes(6 << 20).hex()}  # 12 MB of text: a commit of some length

    async def scenario() -> tuple[int, bool]:
        ticks = 0

        async def ticker() -> None:
            nonlocal ticks
            while True:
                await asyncio.sleep(0.001)
                ticks += 1

        beating = asyncio.create_task(ticker())
        adding = asyncio.create_task(session.add_items([large]))
        await asyncio.sleep(0.05)  # the commit is under way on its worker thread
        adding.cancel()
        with pytest.raises(asyncio.CancelledError):
            await adding
        landed = session.run.head_id() is not None  # read before anything else can run
        beating.cancel()
        return ticks, landed

    ticks, landed = asyncio.run(scenario())
    assert ticks > 5, "the event loop stalled during add_items"
    assert landed and asyncio.run(session.get_items()) == [large]


def test_a_change_cancelled_while_it_waits_for_a_thread_never_lands(tmp_path: Path) -> None:
    """Every thread of the store's pool busy: a cancelled add_items is dropped before it starts, not run later."""
    session = _open(tmp_path / "store")

    async def scenario() -> None:
        gate = threading.Event()
        blockers = [asyncio.ensure_future(session.store.to_thread(gate.wait)) for _ in range(WORKERS)]
        adding = asyncio.create_task(session.add_items([{"role": "user", "content": "dropped"}]))
        await asyncio.sleep(0.05)  # add_items waits for a thread
        adding.cancel()
        await asyncio.sleep(0.05)
        gate.set()  # the threads free: a change still queued would run now
        await asyncio.gather(*blockers)
        with pytest.raises(asyncio.CancelledError):
            await adding
        await session.add_items([{"role": "user", "content": "kept"}])

    asyncio.run(scenario())
    assert asyncio.run(session.get_items()) == [{"role": "user", "content": "kept"}]
    assert len(session.run.ids()) == 1, "the cancelled change was committed"
