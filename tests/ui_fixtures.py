"""Stores the UI tests browse: a run with a fork and a divergence, artifacts of each preview kind, a journal with a
call in flight, hostile names and values, and a real compiled LangGraph graph with a tool call and an interrupt."""

from __future__ import annotations

import io
import struct
import zlib
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import interrupt

import agentfs
from agentfs.cli.main import main
from agentfs.integrations.langgraph import AgentFSSaver

XSS_THREAD = "<script>alert(1)</script><img src=x onerror=alert(1)>"  # run and artifact names cannot hold these; thread ids can
XSS_VALUES = {
    "script": "<script>alert('x')</script>",
    "img": '<img src=x onerror="alert(2)">',
    "link": "javascript:alert(3)",
}
XSS_MARKDOWN = b"# Report\n\n<script>alert(4)</script>\n\n[click](javascript:alert(5))\n\n<img src=x onerror=alert(6)>\n\n**bold**\n"
XSS_HTML = b"<html><body><script>alert(7)</script><img src=x onerror=alert(8)></body></html>"
XSS_SVG = b'<svg xmlns="http://www.w3.org/2000/svg" onload="alert(9)"><script>alert(10)</script></svg>'


def png(width: int = 4, height: int = 4) -> bytes:
    """A small valid red PNG."""
    raw = b"".join(b"\x00" + b"\xff\x00\x00" * width for _ in range(height))

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")


def build_demo(root: Path) -> dict[str, str]:
    """The store at root/store: research (two heads, a divergence made by a second store through a file remote at
    root/remote), research-fork forked from its 2nd checkpoint, a journal with a call in flight, a hostile run."""
    url = (root / "remote").as_uri()
    with agentfs.open(root / "store") as store:
        run = store.run("research")
        first = run.commit({"step": 1, "notes": ["start"]}, metadata={"agent": "planner"})
        second = run.commit(
            {"step": 2, "notes": ["start", "searched"], "big": {f"k{i}": "x" * 50 for i in range(200)}},
            metadata={"agent": "planner"},
            artifacts={
                "chart.png": io.BytesIO(png()),
                "report.md": io.BytesIO(XSS_MARKDOWN),
                "data.csv": io.BytesIO(b"name,score\nalpha,1\n<b>beta</b>,2\n"),
                "result.json": io.BytesIO(b'{"answer": 42}'),
                "page.html": io.BytesIO(XSS_HTML),
                "icon.svg": io.BytesIO(XSS_SVG),
                "blob.bin": io.BytesIO(bytes(range(256))),
            },
        )
        third = run.commit({"step": 3, "notes": ["start", "searched", "wrote"]}, metadata={"agent": "writer"}, keep_artifacts=True)
        run.fork(second.id, "research-fork").commit({"step": 9}, metadata={"agent": "forker"})
        with run.tool_call("search", {"q": "agent checkpoints"}, key="search-1") as call:
            call.result = {"hits": 3}
        run.journal.tool_call("write_report", {"topic": "<script>alert(11)</script>"}, key="write-1").__enter__()  # left in flight
        hostile = {"x.md": io.BytesIO(XSS_MARKDOWN), "x.html": io.BytesIO(XSS_HTML)}
        metadata = {"title": "<img src=x onerror=alert(12)>", "<b>key</b>": "javascript:alert(14)"}
        store.run("evil").commit(XSS_VALUES, metadata=metadata, artifacts=hostile)
    assert main(["--store", str(root / "store"), "sync", url]) == 0
    assert main(["--store", str(root / "other"), "pull", url]) == 0
    with agentfs.open(root / "store") as store:
        mine = store.run("research").commit({"step": 4, "notes": ["mine"]}, metadata={"agent": "writer"})
    with agentfs.open(root / "other") as store:
        theirs = store.run("research").commit({"step": 4, "notes": ["theirs"]}, metadata={"agent": "other machine"})
    assert main(["--store", str(root / "other"), "sync", url]) == 0
    assert main(["--store", str(root / "store"), "pull", url]) == 0
    return {"first": first.id, "second": second.id, "third": third.id, "mine": mine.id, "theirs": theirs.id}


class ChatState(TypedDict):
    messages: Annotated[list[Any], add_messages]


def build_langgraph_thread(path: Path, thread: str = "chat-1") -> None:
    """A compiled graph: an AI message calls a tool, the tool answers, then an interrupt asks a human to approve."""

    def agent(state: ChatState) -> dict[str, Any]:
        call = {"name": "lookup", "args": {"city": "Paris"}, "id": "call-1"}
        return {"messages": [AIMessage(content="Let me look that up <script>alert(13)</script>", tool_calls=[call])]}

    def tools(state: ChatState) -> dict[str, Any]:
        return {"messages": [ToolMessage(content="18 degrees, sunny", tool_call_id="call-1", name="lookup")]}

    def review(state: ChatState) -> dict[str, Any]:
        answer = interrupt({"question": "Send this answer?"})
        return {"messages": [AIMessage(content=f"approved: {answer}")]}

    graph = StateGraph(ChatState)
    graph.add_node("agent", agent)
    graph.add_node("tools", tools)
    graph.add_node("review", review)
    graph.add_edge(START, "agent")
    graph.add_edge("agent", "tools")
    graph.add_edge("tools", "review")
    graph.add_edge("review", END)
    with AgentFSSaver(path) as saver:
        app = graph.compile(checkpointer=saver)
        app.invoke({"messages": [HumanMessage(content="What is the weather in Paris?")]}, {"configurable": {"thread_id": thread}})
