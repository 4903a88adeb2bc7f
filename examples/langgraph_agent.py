"""A LangGraph agent that keeps its threads in agentfs: interrupted for approval, resumed after a restart,
and resumed on another machine from a remote.

  thread "here":   runs until the reviewer's interrupt(), then a fresh graph and saver (as after a
                   process restart) resume it from the same store.
  thread "travel": runs on machine A while a sync daemon pushes every commit to REMOTE; machine B
                   opens an empty store with remote=REMOTE and resumes the thread from there.

Nodes are deterministic stand-ins for LLM calls. REMOTE defaults to a directory under a temp dir;
pass any fsspec URL instead:  python examples/langgraph_agent.py s3://my-bucket/agents
Needs: pip install 'agentfs-store[langgraph]'
"""

from __future__ import annotations

import hashlib
import operator
import sys
import tempfile
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from langgraph.graph.state import CompiledStateGraph
from langgraph.types import Command, interrupt

import agentfs
from agentfs.integrations.langgraph import AgentFSSaver


class Report(TypedDict):
    question: str
    notes: Annotated[list[str], operator.add]
    draft: str
    verdict: str


def research(state: Report) -> dict[str, Any]:
    digest = hashlib.sha256(state["question"].encode()).hexdigest()
    return {"notes": [f"source {digest[i : i + 8]} says something useful" for i in range(0, 24, 8)]}


def write(state: Report) -> dict[str, Any]:
    return {"draft": f"{state['question']}\n" + "\n".join(f"- {note}" for note in state["notes"])}


def review(state: Report) -> dict[str, Any]:
    verdict = interrupt({"please review": state["draft"]})  # the graph stops here until resumed with a verdict
    return {"verdict": verdict}


def build(saver: AgentFSSaver) -> CompiledStateGraph[Any, Any, Any, Any]:
    graph = StateGraph(Report)
    graph.add_node("research", research)
    graph.add_node("write", write)
    graph.add_node("review", review)
    graph.add_edge(START, "research")
    graph.add_edge("research", "write")
    graph.add_edge("write", "review")
    graph.add_edge("review", END)
    return graph.compile(checkpointer=saver)


def start(graph: CompiledStateGraph[Any, Any, Any, Any], config: RunnableConfig, question: str) -> None:
    result = graph.invoke({"question": question, "notes": [], "draft": "", "verdict": ""}, config)
    (pending,) = result["__interrupt__"]
    print(f"  interrupted, waiting for: {next(iter(pending.value))!r}")


def finish(graph: CompiledStateGraph[Any, Any, Any, Any], config: RunnableConfig, verdict: str) -> dict[str, Any]:
    waiting = graph.get_state(config)
    print(f"  found the thread waiting at {waiting.next} after step {waiting.metadata['step'] if waiting.metadata else '?'}")
    result = graph.invoke(Command(resume=verdict), config)
    steps = len(list(graph.get_state_history(config)))
    print(f"  resumed and finished: verdict {result['verdict']!r}, {len(result['notes'])} notes, {steps} checkpoints")
    return result


def main(workdir: Path, remote: str) -> None:
    here: RunnableConfig = {"configurable": {"thread_id": "here"}}
    travel: RunnableConfig = {"configurable": {"thread_id": "travel"}}

    print(f"== machine A: store {workdir / 'a'}, syncing to {remote}")
    with agentfs.open(workdir / "a") as store, store.sync(remote) as daemon:
        start(build(AgentFSSaver(store)), here, "Why do agents need checkpoints?")
        start(build(AgentFSSaver(store)), travel, "How do agents resume elsewhere?")
        print("== machine A: restart (a new graph and saver on the same store)")
        finish(build(AgentFSSaver(store)), here, "approved")
        if not daemon.flush(timeout=60):
            raise SystemExit(f"the remote did not receive every commit: {daemon.status()}")

    print(f"== machine B: empty store {workdir / 'b'} that reads what it lacks from {remote}")
    with agentfs.open(workdir / "b", remote=remote) as store:
        finish(build(AgentFSSaver(store)), travel, "approved from machine B")
        print(f"== machine B: verify: {store.verify()}")


if __name__ == "__main__":
    with tempfile.TemporaryDirectory(prefix="agentfs-langgraph-") as temp:
        main(Path(temp), sys.argv[1] if len(sys.argv) > 1 else (Path(temp) / "remote").as_uri())
