"""`agentfs mcp` as a client meets it: a real server process, driven by the MCP SDK's own client over
stdio and over streamable HTTP, on the handshake-era protocol (resources/subscribe) and on 2026-07-28
(subscriptions/listen)."""

from __future__ import annotations

import base64
import datetime as dt
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client, MCPError, StdioServerParameters, types

import agentfs
from agentfs.extras import install_line

AGENTFS = shutil.which("agentfs", path=str(Path(sys.executable).parent))
COMMAND = [AGENTFS] if AGENTFS else [sys.executable, "-m", "agentfs.cli.main"]
ENV = {key: value for key, value in os.environ.items() if key != "AGENTFS_STORE"}
RUN = "agent/main"
LONG_NOTE = "note " * 400  # longer than any preview
BINARY = bytes(range(256)) * 8
WRITE_TOOLS = {"commit", "fork", "write_artifact"}
READ_TOOLS = {
    "list_runs",
    "list_checkpoints",
    "show_checkpoint",
    "read_state",
    "diff_checkpoints",
    "read_artifact",
    "list_journal",
    "read_conversation",
}
LEGACY, MODERN = "legacy", "2026-07-28"
TIMEOUT = 20

pytestmark = pytest.mark.filterwarnings("ignore::mcp.MCPDeprecationWarning")  # resources/subscribe is the legacy way, on purpose


@pytest.fixture
def root(tmp_path: Path) -> Iterator[Path]:
    """A store with one run of two checkpoints (mixed state types, a text and a binary artifact) and a journaled call."""
    path = tmp_path / ".agentfs"
    with agentfs.open(path) as store:
        run = store.run(RUN)
        run.commit(
            {
                "step": 1,
                "messages": ["hello"],
                "note": LONG_NOTE,
                "blob": b"\x00\xff",
                "when": dt.datetime(2026, 1, 2, tzinfo=dt.timezone.utc),
            },
            artifacts={"report.md": b"# draft\n", "image.bin": BINARY},
            metadata={"source": "test"},
        )
        run.commit(
            {
                "step": 2,
                "messages": ["hello", "world"],
                "blob": b"\x00\xff",
                "when": dt.datetime(2026, 1, 2, tzinfo=dt.timezone.utc),
                "extra": 1.5,
            },
            artifacts={"report.md": b"# final\n", "image.bin": BINARY, "new.txt": b"new"},
        )
        run.once("search:cats", lambda: {"hits": 3})
    yield path


def stdio_server(root: Path, *options: str) -> StdioServerParameters:
    return StdioServerParameters(command=COMMAND[0], args=[*COMMAND[1:], "--store", str(root), "mcp", *options], env=ENV)


@asynccontextmanager
async def http_server(root: Path, *options: str) -> AsyncIterator[str]:
    """`agentfs mcp --http 127.0.0.1:0` as a process; yields its URL, read from the line it prints on stderr."""
    process = await anyio.open_process([*COMMAND, "--store", str(root), "mcp", "--http", "127.0.0.1:0", *options], env=ENV)
    try:
        assert process.stderr is not None
        printed = b""
        with anyio.fail_after(TIMEOUT):
            while b"\n" not in printed:
                printed += await process.stderr.receive()
        match = re.search(r"serving (http://127\.0\.0\.1:\d+/mcp)", printed.decode())
        assert match, printed
        yield match.group(1)
    finally:
        process.terminate()
        with anyio.fail_after(TIMEOUT):
            assert await process.wait() == 0  # SIGTERM stops it cleanly


async def commit_elsewhere(root: Path, run: str, step: int) -> str:
    """Commit from another process, as an agent beside the server would; returns the new checkpoint's id."""
    script = "import sys, agentfs; print(agentfs.open(sys.argv[1]).run(sys.argv[2]).commit({'step': int(sys.argv[3])}).id)"
    done = await anyio.run_process([sys.executable, "-c", script, str(root), run, str(step)], env=ENV)
    return done.stdout.decode().strip()


async def call(client: Client, tool: str, arguments: dict[str, Any]) -> Any:
    """A tool's JSON document; the call must succeed."""
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content
    text = result.content[0]
    assert isinstance(text, types.TextContent)
    document = json.loads(text.text)
    assert result.structured_content == document
    return document


async def tool_error(client: Client, tool: str, arguments: dict[str, Any]) -> str:
    result = await client.call_tool(tool, arguments)
    assert result.is_error, result
    text = result.content[0]
    assert isinstance(text, types.TextContent)
    return text.text


def run_async(fn: Callable[..., Awaitable[None]], *args: Any) -> None:
    async def bounded() -> None:
        with anyio.fail_after(60):
            await fn(*args)

    anyio.run(bounded)


async def check_tools_listed(client: Client, *, read_only: bool = False) -> None:
    tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert set(tools) == (READ_TOOLS if read_only else READ_TOOLS | WRITE_TOOLS)
    for name, tool in tools.items():
        hints = tool.annotations
        assert hints is not None and tool.input_schema["type"] == "object"
        assert hints.read_only_hint is (name in READ_TOOLS)
        assert hints.idempotent_hint is (name in READ_TOOLS)
        assert hints.destructive_hint is False  # every write appends a checkpoint
        assert hints.open_world_hint is False


async def check_read_tools(client: Client, root: Path) -> None:
    with agentfs.open(root) as store:
        run = store.run(RUN)
        first, head = run.history()[::-1]
        journal_call = run.journal.calls()[0]

    runs = await call(client, "list_runs", {})
    assert runs["runs"] == [
        {"name": RUN, "checkpoints": 2, "head": head.id, "head_created": head.created.isoformat(timespec="microseconds")}
    ]

    log = await call(client, "list_checkpoints", {"run": RUN, "limit": 1})
    assert log["total"] == 2 and [cp["id"] for cp in log["checkpoints"]] == [head.id]

    shown = await call(client, "show_checkpoint", {"checkpoint": f"{RUN}@{first.id}"})
    assert shown["id"] == first.id and shown["parent"] is None and shown["metadata"] == {"source": "test"}
    assert shown["state_keys"] == sorted(first.state) and shown["artifacts"] == {"report.md": 8, "image.bin": len(BINARY)}

    brief = await call(client, "read_state", {"checkpoint": f"{RUN}@{first.id}"})
    note = brief["keys"]["note"]
    assert note["type"] == "str" and note["chars"] == len(json.dumps(LONG_NOTE)) and len(note["preview"]) < len(LONG_NOTE)
    assert brief["keys"]["blob"]["preview"] == {"$bytes": base64.b64encode(b"\x00\xff").decode(), "size": 2}
    assert brief["keys"]["when"]["preview"] == "2026-01-02T00:00:00+00:00"
    full = await call(client, "read_state", {"checkpoint": f"{RUN}@{first.id}", "key": "note"})
    assert full["value"] == LONG_NOTE

    diff = await call(client, "diff_checkpoints", {"a": f"{RUN}@{first.id}", "b": RUN})
    assert diff["same"] is False and diff["b"] == str(head)
    assert set(diff["state"]["added"]) == {"extra"} and set(diff["state"]["removed"]) == {"note"}
    assert set(diff["state"]["changed"]) == {"step", "messages"}
    assert diff["state"]["changed"]["step"]["a"]["preview"] == 1 and diff["state"]["changed"]["step"]["b"]["preview"] == 2
    assert diff["artifacts"] == {"added": {"new.txt": 3}, "removed": {}, "changed": {"report.md": {"size_a": 8, "size_b": 8}}}
    same = await call(client, "diff_checkpoints", {"a": RUN, "b": f"{RUN}@{head.id}"})
    assert same["same"] is True

    text = await call(client, "read_artifact", {"checkpoint": RUN, "name": "report.md"})
    assert (text["encoding"], text["content"], text["more"]) == ("utf-8", "# final\n", False)
    binary = await call(client, "read_artifact", {"checkpoint": RUN, "name": "image.bin", "offset": 100, "length": 1000})
    assert binary["encoding"] == "base64" and base64.b64decode(binary["content"]) == BINARY[100:1100]
    assert binary["size"] == len(BINARY) and binary["more"] is True

    journal = await call(client, "list_journal", {"run": RUN})
    assert journal["total"] == 1 and journal["damaged"] == []
    (listed,) = journal["calls"]
    assert (listed["key"], listed["status"], listed["result"]) == ("search:cats", "ok", {"hits": 3})
    assert listed["started"] == journal_call.started.isoformat(timespec="microseconds")


async def check_write_tools(client: Client, root: Path) -> None:
    committed = await call(
        client, "commit", {"run": RUN, "state": {"step": 3}, "metadata": {"by": "mcp"}, "artifacts": {"log.txt": {"content": "ok"}}}
    )
    written = await call(
        client, "write_artifact", {"run": RUN, "name": "data.bin", "content": base64.b64encode(BINARY[:10]).decode(), "encoding": "base64"}
    )
    forked = await call(client, "fork", {"checkpoint": f"{RUN}@{committed['id']}", "new_run": "agent/branch"})
    with agentfs.open(root) as store:
        head = store.run(RUN).latest()
        assert head is not None and head.id == written["id"] and head.parent == committed["id"]
        assert head.state == {"step": 3} and head.metadata == {"by": "mcp"}  # write_artifact keeps the head's state and metadata
        kept = {name: artifact.read_bytes() for name, artifact in head.artifacts.items()}
        assert kept == {"report.md": b"# final\n", "image.bin": BINARY, "new.txt": b"new", "log.txt": b"ok", "data.bin": BINARY[:10]}
        branch = store.run("agent/branch").latest()
        assert branch is not None and branch.id == forked["id"] and branch.forked_from == (RUN, committed["id"])
        assert branch.state == {"step": 3}
    dropped = await call(client, "commit", {"run": "agent/branch", "state": [1, 2], "keep_artifacts": False})
    assert dropped["artifacts"] == {} and dropped["state_keys"] is None


async def check_errors(client: Client, root: Path) -> None:
    """Failures come back as tool errors (isError) carrying the message agentfs itself gives."""
    with agentfs.open(root) as store:
        head = store.run(RUN).latest()
        assert head is not None
        with pytest.raises(agentfs.InvalidName) as bad_name:
            store.run("no spaces")
        with pytest.raises(agentfs.NotFound) as no_artifact:
            head.artifacts["missing.txt"]
        with pytest.raises(agentfs.NotFound) as no_key:
            head.value("missing")
    assert await tool_error(client, "show_checkpoint", {"checkpoint": "no spaces"}) == str(bad_name.value)
    assert await tool_error(client, "read_artifact", {"checkpoint": RUN, "name": "missing.txt"}) == str(no_artifact.value)
    assert await tool_error(client, "read_state", {"checkpoint": RUN, "key": "missing"}) == str(no_key.value)
    assert await tool_error(client, "list_checkpoints", {"run": "nosuch"}) == "run 'nosuch' not found: it has no checkpoints"
    stale = await tool_error(client, "commit", {"run": RUN, "state": {}, "parent": "0" * 26, "keep_artifacts": False})
    assert stale == f"run {RUN!r}: expected head {'0' * 26}, found {head.id}"
    assert "not valid base64" in await tool_error(
        client, "write_artifact", {"run": RUN, "name": "x", "content": "@@", "encoding": "base64"}
    )
    assert (await tool_error(client, "fork", {"checkpoint": RUN, "new_run": RUN})).startswith(f"run {RUN!r}: expected head")
    missing = await tool_error(client, "commit", {"state": {}})
    assert missing.startswith("tool 'commit': invalid arguments: run: Field required")
    assert (await tool_error(client, "delete_everything", {})).startswith("no tool 'delete_everything'")


async def check_latest_resource(client: Client, root: Path) -> str:
    with agentfs.open(root) as store:
        head = store.run(RUN).latest()
        runs = store.runs()
    assert head is not None
    uri = f"agentfs://runs/{RUN}/latest"
    listed = (await client.list_resources()).resources
    assert sorted((str(item.uri), item.mime_type) for item in listed) == sorted(
        (f"agentfs://runs/{run}/latest", "application/json") for run in runs
    )
    document = json.loads((await client.read_resource(uri)).contents[0].text)  # type: ignore[union-attr]
    assert document["id"] == head.id and set(document["state"]["keys"]) == set(head.state)
    with pytest.raises(MCPError, match="run 'nosuch' not found"):
        await client.read_resource("agentfs://runs/nosuch/latest")
    return uri


async def exercise(client: Client, root: Path) -> None:
    await check_tools_listed(client)
    await check_read_tools(client, root)
    await check_errors(client, root)
    await check_latest_resource(client, root)
    await check_write_tools(client, root)


async def hear_commit_by_subscribe(server: Any, root: Path) -> None:
    """resources/subscribe (handshake era): a commit by another process brings notifications/resources/updated."""
    send, updates = anyio.create_memory_object_stream[str](100)
    other = "agentfs://runs/other/latest"

    async def on_message(message: Any) -> None:
        if isinstance(message, types.ResourceUpdatedNotification):
            await send.send(str(message.params.uri))

    async def next_update() -> str:
        with anyio.fail_after(TIMEOUT):
            return await updates.receive()

    async with Client(server, mode=LEGACY, message_handler=on_message) as client:
        assert client.server_capabilities.resources is not None and client.server_capabilities.resources.subscribe
        uri = await check_latest_resource(client, root)
        await client.subscribe_resource(uri)
        await client.subscribe_resource(other)  # a run that has no checkpoint yet
        await commit_elsewhere(root, "other", 1)
        assert await next_update() == other
        new_id = await commit_elsewhere(root, RUN, 3)
        assert await next_update() == uri
        document = json.loads((await client.read_resource(uri)).contents[0].text)  # type: ignore[union-attr]
        assert document["id"] == new_id
        await client.unsubscribe_resource(uri)
        await commit_elsewhere(root, RUN, 4)
        await commit_elsewhere(root, "other", 2)
        assert await next_update() == other  # not uri: its subscription ended, and its commit came first


async def hear_commit_by_listen(server: Any, root: Path) -> None:
    """subscriptions/listen (2026-07-28): the same commit arrives as a ResourceUpdated event on the stream."""
    async with Client(server, mode=MODERN) as client:
        uri = f"agentfs://runs/{RUN}/latest"
        async with client.listen(resource_subscriptions=[uri]) as subscription:
            new_id = await commit_elsewhere(root, RUN, 5)
            with anyio.fail_after(TIMEOUT):
                event = await subscription.__anext__()
            assert getattr(event, "uri", None) == uri
        document = json.loads((await client.read_resource(uri)).contents[0].text)  # type: ignore[union-attr]
        assert document["id"] == new_id


def test_every_tool_over_stdio(root: Path) -> None:
    async def scenario() -> None:
        async with Client(stdio_server(root)) as client:
            assert client.protocol_version == MODERN  # the SDK client's default negotiation picks the newest
            await exercise(client, root)
        async with Client(stdio_server(root), mode=LEGACY) as client:
            await check_tools_listed(client)
            await check_errors(client, root)

    run_async(scenario)


def test_subscribers_hear_commits_from_another_process_over_stdio(root: Path) -> None:
    async def scenario() -> None:
        await hear_commit_by_subscribe(stdio_server(root), root)
        await hear_commit_by_listen(stdio_server(root), root)

    run_async(scenario)


def test_every_tool_and_subscriptions_over_streamable_http(root: Path) -> None:
    async def scenario() -> None:
        async with http_server(root) as url:
            async with Client(url) as client:
                assert client.protocol_version == MODERN
                await exercise(client, root)
            async with Client(url, mode=LEGACY) as client:
                await check_tools_listed(client)
                await check_errors(client, root)
            await hear_commit_by_subscribe(url, root)
            await hear_commit_by_listen(url, root)

    run_async(scenario)


def test_read_only_hides_and_refuses_write_tools(root: Path) -> None:
    with agentfs.open(root) as store:
        before = store.run(RUN).ids()

    async def scenario() -> None:
        async with Client(stdio_server(root, "--read-only")) as client:
            await check_tools_listed(client, read_only=True)
            for tool in WRITE_TOOLS:
                refused = await tool_error(
                    client, tool, {"run": RUN, "state": {}, "checkpoint": RUN, "new_run": "x", "name": "a", "content": ""}
                )
                assert refused == f"tool {tool!r} writes to the store, and this server runs with --read-only"
            await check_read_tools(client, root)

    run_async(scenario)
    with agentfs.open(root) as store:
        assert store.run(RUN).ids() == before and store.runs() == [RUN]


def test_command_line_errors() -> None:
    bad = subprocess.run([*COMMAND, "mcp", "--http", "localhost"], capture_output=True, text=True, env=ENV, timeout=60, check=False)
    assert bad.returncode == 2 and "'localhost' is not HOST:PORT" in bad.stderr
    missing = subprocess.run(
        [*COMMAND, "--store", "/nonexistent/store", "mcp"], capture_output=True, text=True, env=ENV, timeout=60, check=False
    )
    assert missing.returncode == 3 and missing.stderr.startswith("agentfs: error: no agentfs store at /nonexistent/store")


def test_the_cli_imports_without_the_sdk() -> None:
    """`mcp` is an optional extra: the command line must load (and `agentfs mcp` explain itself) without it."""
    blocker = "import sys; sys.modules['mcp'] = None; from agentfs.cli.main import main; sys.exit(main(sys.argv[1:]))"
    listed = subprocess.run([sys.executable, "-c", blocker, "--help"], capture_output=True, text=True, env=ENV, timeout=60, check=False)
    assert listed.returncode == 0 and "mcp" in listed.stdout
    served = subprocess.run([sys.executable, "-c", blocker, "mcp"], capture_output=True, text=True, env=ENV, timeout=60, check=False)
    assert served.returncode == 4 and install_line("mcp") in served.stderr


def test_documented_client_configuration_starts_a_read_only_server(root: Path) -> None:
    """The docs' `mcpServers` snippet, with its store path pointed at a real store, is a working client configuration."""
    section = (Path(__file__).resolve().parents[2] / "docs" / "integrations" / "mcp.md").read_text()
    snippet = json.loads(section[section.index("```json") + len("```json") : section.index("```", section.index("```json") + 7)])
    entry = snippet["mcpServers"]["agentfs"]
    assert entry["command"] == "agentfs" and snippet["mcpServers"]["agentfs-http"]["url"].endswith("/mcp")
    args = [str(root) if arg == "/path/to/.agentfs" else arg for arg in entry["args"]]
    server = StdioServerParameters(command=COMMAND[0], args=[*COMMAND[1:], *args], env=ENV)

    async def scenario() -> None:
        async with Client(server) as client:
            await check_tools_listed(client, read_only=True)

    run_async(scenario)


def test_writes_keep_the_head_schema_version(root: Path) -> None:
    """A client reads and writes states as stored: its commits must not look unversioned, or the agent's
    code would run its migrations again over a state already at its version."""
    schema = agentfs.Schema(version=2, migrations={1: lambda state: {**state, "migrated": True}})
    with agentfs.open(root) as store:
        store.run("agent/versioned", schema=schema).commit({"v": 1}, artifacts={"a.txt": b"a"})

    async def scenario() -> None:
        async with Client(stdio_server(root)) as client:
            assert (await call(client, "show_checkpoint", {"checkpoint": "agent/versioned"}))["schema_version"] == 2
            await call(client, "write_artifact", {"run": "agent/versioned", "name": "b.txt", "content": "b"})
            committed = await call(client, "commit", {"run": "agent/versioned", "state": {"v": 2}})
            assert committed["schema_version"] == 2

    run_async(scenario)
    with agentfs.open(root) as store:
        history = store.run("agent/versioned", schema=schema).history()
        assert [cp.schema_version for cp in history] == [2, 2, 2]
        assert [cp.state for cp in history] == [{"v": 2}, {"v": 1}, {"v": 1}]  # never "migrated"
        assert set(history[0].artifacts) == {"a.txt", "b.txt"}
