"""A LangGraph agent with a checkpointer and long-term memory, both in agentfs, resumed on another machine.

  machine A: thread "chat-1": the agent learns facts about alice (AgentFSStore, with a local vector
             index), drafts a reply and waits at interrupt() for approval; a sync daemon pushes
             every commit (checkpoints and memories) to REMOTE; then machine A is gone.
  machine B: an empty store opened with remote=REMOTE resumes "chat-1" where it waited, then a new
             thread "chat-2" answers from what alice's memory says, found by vector search.

The "model" is scripted and the embedding is a local bag of words: no network, no API key.
REMOTE defaults to a directory under a temp dir; pass any fsspec URL instead:
    python examples/langgraph_memory.py s3://my-bucket/agents
Needs: pip install 'agentfs[langgraph]'
"""

from __future__ import annotations

import hashlib
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.runtime import Runtime
from langgraph.store.base import IndexConfig
from langgraph.types import Command, interrupt

import agentfs
from agentfs.integrations.langgraph import AgentFSSaver, AgentFSStore

DIMS = 256


def embed(texts: Sequence[str]) -> list[list[float]]:
    """A local stand-in for an embedding model: one dimension per word (by hash), no service."""
    vectors = []
    for text in texts:
        vector = [0.0] * DIMS
        for word in text.lower().replace("?", "").replace(".", "").split():
            vector[int.from_bytes(hashlib.sha256(word.encode()).digest()[:4], "big") % DIMS] += 1.0
        vectors.append(vector)
    return vectors


INDEX = IndexConfig(dims=DIMS, embed=embed, fields=["fact"])


class Chat(TypedDict):
    user: str
    message: str
    recalled: list[str]
    reply: str
    sent: bool


def remember(state: Chat, runtime: Runtime[None]) -> dict[str, Any]:
    """The scripted model's extraction step: every sentence that starts with "I" becomes a memory."""
    assert runtime.store is not None
    facts = [s.strip() for s in state["message"].split(".") if s.strip().startswith("I ")]
    for fact in facts:
        key = hashlib.sha256(fact.encode()).hexdigest()[:12]
        runtime.store.put(("memories", state["user"]), key, {"fact": fact})
    return {}


def recall(state: Chat, runtime: Runtime[None]) -> dict[str, Any]:
    assert runtime.store is not None
    found = runtime.store.search(("memories", state["user"]), query=state["message"], limit=2)
    return {"recalled": [item.value["fact"] for item in found]}


def draft(state: Chat) -> dict[str, Any]:
    known = "; ".join(state["recalled"]) or "nothing yet"
    return {"reply": f"(knowing: {known}) Here is my answer to {state['message']!r}."}


def approve(state: Chat) -> dict[str, Any]:
    verdict = interrupt({"send this reply?": state["reply"]})  # the graph waits here until resumed
    return {"sent": verdict == "send"}


def build(saver: AgentFSSaver, memory: AgentFSStore) -> CompiledStateGraph[Any, Any, Any, Any]:
    graph = StateGraph(Chat)
    graph.add_node("remember", remember)
    graph.add_node("recall", recall)
    graph.add_node("draft", draft)
    graph.add_node("approve", approve)
    graph.add_edge(START, "remember")
    graph.add_edge("remember", "recall")
    graph.add_edge("recall", "draft")
    graph.add_edge("draft", "approve")
    graph.add_edge("approve", END)
    return graph.compile(checkpointer=saver, store=memory)


def ask(graph: CompiledStateGraph[Any, Any, Any, Any], config: RunnableConfig, message: str) -> None:
    result = graph.invoke({"user": "alice", "message": message, "recalled": [], "reply": "", "sent": False}, config)
    (pending,) = result["__interrupt__"]
    print(f"  waiting for approval of: {pending.value['send this reply?']}")


def main(workdir: Path, remote: str) -> None:
    chat1: RunnableConfig = {"configurable": {"thread_id": "chat-1"}}
    chat2: RunnableConfig = {"configurable": {"thread_id": "chat-2"}}

    print(f"== machine A: store {workdir / 'a'}, syncing to {remote}")
    with agentfs.open(workdir / "a") as store, store.sync(remote) as daemon:
        memory = AgentFSStore(store, index=INDEX)
        ask(build(AgentFSSaver(store), memory), chat1, "I drink green tea every morning. I live in Lisbon. Plan my week?")
        print(f"  memories of alice: {len(memory.search(('memories', 'alice'), limit=100))}")
        if not daemon.flush(timeout=60):
            raise SystemExit(f"the remote did not receive every commit: {daemon.status()}")
    print("== machine A is gone")

    print(f"== machine B: empty store {workdir / 'b'} that reads what it lacks from {remote}")
    with agentfs.open(workdir / "b", remote=remote) as store:
        memory = AgentFSStore(store, index=INDEX)
        graph = build(AgentFSSaver(store), memory)
        waiting = graph.get_state(chat1)
        print(f"  chat-1 found waiting at {waiting.next}")
        result = graph.invoke(Command(resume="send"), chat1)
        print(f"  chat-1 resumed and finished: sent={result['sent']}")
        ask(graph, chat2, "Which tea should I buy?")
        recalled = graph.get_state(chat2).values["recalled"]
        print(f"  chat-2 recalled from machine A's memory: {recalled}")
        print(f"  namespaces: {memory.list_namespaces()}")
        print(f"== machine B: verify: {store.verify()}")


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="agentfs-memory-") as temp:
        main(Path(temp), sys.argv[1] if len(sys.argv) > 1 else (Path(temp) / "remote").as_uri())
