"""AgentFSMessageHistory under a real Pydantic AI Agent driven by its FunctionModel (no network): the same
history as a JSON file kept by hand, each append a checkpoint, forks, and a process SIGKILLed after a
journaled tool call that resumes from moto S3 on another machine with nothing repeated or lost.
"""

from __future__ import annotations

import asyncio
import json
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

if __name__ != "__main__":
    import pytest

    pytest.importorskip("pydantic_ai")

from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import (
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

import agentfs
from agentfs.integrations.pydantic_ai import AgentFSMessageHistory, ForkError
from tests.helpers import killed_turns

QUESTIONS = ["pay 1", "pay 2", "pay 3"]


def scripted(messages: list[ModelMessage], _info: AgentInfo) -> ModelResponse:
    """`pay N` calls the pay tool with N (a call id fixed by the question); its return is answered in text."""
    last = messages[-1]
    returned = [part for part in last.parts if isinstance(part, ToolReturnPart)]
    if returned:
        return ModelResponse(parts=[TextPart(f"done: {returned[0].content} after {len(messages)} messages")])
    prompt = next(part.content for part in last.parts if isinstance(part, UserPromptPart))
    assert isinstance(prompt, str)
    return ModelResponse(parts=[ToolCallPart("pay", {"amount": int(prompt.split()[1])}, tool_call_id=f"call-{prompt}")])


def make_agent(history: AgentFSMessageHistory, ledger: Path, stop_at: str = "") -> Agent[None, str]:
    agent = Agent(FunctionModel(scripted))

    @agent.tool
    def pay(ctx: RunContext[None], amount: int) -> str:
        paid = history.once(f"pay/{ctx.tool_call_id}", killed_turns.pay, str(ledger), amount)
        killed_turns.report(f"paid {amount}", stop_at)
        return paid

    return agent


def prompts(messages: list[ModelMessage]) -> list[str]:
    return [str(part.content) for m in messages if isinstance(m, ModelRequest) for part in m.parts if isinstance(part, UserPromptPart)]


def converse(history: AgentFSMessageHistory, ledger: Path, stop_at: str = "") -> list[str]:
    """Ask each question the history has not answered yet; each turn's new messages are one append."""
    agent = make_agent(history, ledger, stop_at)
    answers = []
    for question in QUESTIONS[len(prompts(history.messages())) :]:
        result = agent.run_sync(question, message_history=history.messages())
        history.append(result.new_messages())
        answers.append(result.output)
        killed_turns.report(f"turn {question}", stop_at)
    return answers


def test_a_real_agent_keeps_the_history_a_json_file_keeps_call_by_call(tmp_path: Path) -> None:
    ledger, file = tmp_path / "ledger", tmp_path / "history.json"
    with agentfs.open(tmp_path / "store") as store:
        history = AgentFSMessageHistory("chat", store)
        agent = make_agent(history, ledger)
        file.write_bytes(ModelMessagesTypeAdapter.dump_json([]))
        for turn, question in enumerate(QUESTIONS, 1):
            from_file = ModelMessagesTypeAdapter.validate_json(file.read_bytes())
            assert history.messages() == from_file
            result = agent.run_sync(question, message_history=history.messages())
            history.append(result.new_messages())
            file.write_bytes(ModelMessagesTypeAdapter.dump_json([*from_file, *result.new_messages()]))
            assert history.messages() == ModelMessagesTypeAdapter.validate_json(file.read_bytes()) == result.all_messages()
            assert len(history.run.ids()) == turn  # one checkpoint per append
        assert result.output == "done: paid 3 after 11 messages"  # the model saw the whole history
        assert prompts(history.messages()) == QUESTIONS and killed_turns.payments(ledger) == [1, 2, 3]
        assert len(history) == 12 and history.append([]) is None and len(history.run.ids()) == 3
        assert AgentFSMessageHistory("chat", store).messages() == result.all_messages()  # a new object reads it back
        # each checkpoint counts the messages; the first names the conversation (the run name may hold a hash of it)
        *later, first = history.run.history()
        assert first.metadata == {"conversation_id": "chat", "messages": 4}
        assert [checkpoint.metadata for checkpoint in later] == [{"messages": 12}, {"messages": 8}]


def test_a_fork_holds_the_messages_up_to_the_fork_and_diverges_after(tmp_path: Path) -> None:
    with agentfs.open(tmp_path / "store") as store:
        history = AgentFSMessageHistory("chat", store)
        converse(history, tmp_path / "ledger")
        everything = history.messages()
        first_turn = 4  # request, tool call, tool return, answer
        fork = history.fork("chat-retry", at=first_turn)
        assert fork.messages() == everything[:first_turn]
        forked = fork.run.get(fork.run.ids()[0])
        assert forked.forked_from == (history.run.name, history.run.ids()[0])  # the turn's own checkpoint: nothing copied
        answer = make_agent(fork, tmp_path / "ledger").run_sync("pay 7", message_history=fork.messages())
        fork.append(answer.new_messages())
        assert prompts(fork.messages()) == ["pay 1", "pay 7"] and history.messages() == everything
        assert history.fork("chat-mid", at=5).messages() == everything[:5]  # not at a turn boundary: cut and committed
        with pytest.raises(ForkError, match="chat-retry"):
            history.fork("chat-retry")
        with pytest.raises(ForkError, match="13"):
            history.fork("chat-13", at=13)
        with pytest.raises(ForkError, match="'empty' has 0 messages"):
            AgentFSMessageHistory("empty", store).fork("x")


def test_writers_appending_to_one_conversation_lose_nothing(tmp_path: Path) -> None:
    with agentfs.open(tmp_path / "store") as store:
        one, two = AgentFSMessageHistory("chat", store), AgentFSMessageHistory("chat", store)
        one.append([ModelRequest(parts=[UserPromptPart("from one")])])
        two.append([ModelRequest(parts=[UserPromptPart("from two")])])
        asyncio.run(one.aappend([ModelRequest(parts=[UserPromptPart("one again")])]))  # one's last write is not the head now
        assert prompts(asyncio.run(one.amessages())) == ["from one", "from two", "one again"]

        def append_ten(writer: int) -> None:
            history = AgentFSMessageHistory("chat", store)
            for n in range(10):
                history.append([ModelRequest(parts=[UserPromptPart(f"{writer}.{n}")])])

        with ThreadPoolExecutor(4) as pool:
            list(pool.map(append_ten, range(4)))
        appended = prompts(one.messages())[3:]
        assert sorted(appended) == sorted(f"{w}.{n}" for w in range(4) for n in range(10))
        assert [p for p in appended if p.startswith("0.")] == [f"0.{n}" for n in range(10)]  # each writer's order kept


def test_a_run_that_is_no_history_is_refused_by_name(tmp_path: Path) -> None:
    with agentfs.open(tmp_path / "store") as store:
        store.run("pydantic-ai/other").commit({"something": "else"})
        with pytest.raises(agentfs.FormatError, match="'pydantic-ai/other' is not a Pydantic AI message history"):
            AgentFSMessageHistory("other", store).messages()
        with pytest.raises(ValueError, match="only when AgentFSMessageHistory opens the store"):
            AgentFSMessageHistory("x", store, remote="s3://bucket")
        assert AgentFSMessageHistory("a/b c", store).run.name.startswith("pydantic-ai/h")  # any id gets its own run


def test_sigkill_after_a_journaled_tool_call_resumes_from_s3_on_another_machine(tmp_path: Path, moto_server: Any) -> None:
    from tests.servers import make_s3_spec

    spec = make_s3_spec(moto_server)
    ledger = tmp_path / "ledger"
    child = killed_turns.start(
        "tests.integrations.test_pydantic_ai", tmp_path / "machine-a", spec.url, spec.storage_options, ledger, "paid 2"
    )
    assert killed_turns.kill_at(child, "paid 2") == ["paid 1", "turn pay 1", "paid 2"]

    history = AgentFSMessageHistory("chat", tmp_path / "machine-b", remote=spec.url, storage_options=spec.storage_options)
    assert prompts(history.messages()) == ["pay 1"]  # the turn cut short was never committed
    assert converse(history, ledger) == ["done: paid 2 after 7 messages", "done: paid 3 after 11 messages"]
    assert killed_turns.payments(ledger) == [1, 2, 3], "a payment recorded in the journal was made again, or one was lost"
    assert prompts(history.messages()) == QUESTIONS and history.store.verify().ok
    history.close()


def _machine_a(store_path: str, url: str, options: str, ledger: str, stop_at: str) -> None:
    """The killed child: converse on machine A, pushing each journaled call and each turn before reporting it."""
    with agentfs.open(store_path) as store, store.sync(url, storage_options=json.loads(options)) as daemon:
        history = AgentFSMessageHistory("chat", store)
        original = history.once

        def once_and_push(key: str, fn: Any, /, *args: Any, **kwargs: Any) -> Any:
            value = original(key, fn, *args, **kwargs)
            assert daemon.flush(timeout=60)
            return value

        history.once = once_and_push  # type: ignore[method-assign]
        original_append = history.append

        def append_and_push(messages: Any) -> Any:
            checkpoint = original_append(messages)
            assert daemon.flush(timeout=60)
            return checkpoint

        history.append = append_and_push  # type: ignore[method-assign]
        converse(history, Path(ledger), stop_at)


if __name__ == "__main__":
    _machine_a(*sys.argv[1:6])
