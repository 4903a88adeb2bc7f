"""`agentfs mcp`: an agentfs store served over MCP (the official `mcp` SDK's low-level Server).

Tools (tools.py) read and, unless read-only, append to the store. Each run's latest checkpoint is a
resource, `agentfs://runs/<run>/latest`. A client that subscribes to it hears of every new head,
committed by this server or any other process (from `store.watch`): `resources/subscribe` then
`notifications/resources/updated` on handshake-era protocol versions, a `subscriptions/listen`
stream on 2026-07-28 and later. Store calls block, so they run on a worker thread, one at a time.
"""

from __future__ import annotations

import dataclasses
import logging
import signal
import socket
import sys
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import anyio
import uvicorn
from mcp import types
from mcp.server import Server, ServerRequestContext
from mcp.server.session import ServerSession
from mcp.server.stdio import stdio_server
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ResourceUpdated
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

import agentfs

from .conversation_tool import CONVERSATION_TOOL
from .render import checkpoint_summary, dumps, state_summary
from .tools import TOOLS, ToolSpec

ALL_TOOLS = (*TOOLS, CONVERSATION_TOOL)

URI_PREFIX = "agentfs://runs/"
URI_SUFFIX = "/latest"
NOTIFY_TIMEOUT = 5.0  # seconds a subscriber may take to accept one notification before it is dropped
STDIO_CONNECTION = "stdio"  # the one connection a stdio server has

log = logging.getLogger("agentfs.mcp")
T = TypeVar("T")

INSTRUCTIONS = """\
agentfs keeps an AI agent's checkpoints (state + artifacts) in named runs. Name a checkpoint 'RUN'
(the run's newest) or 'RUN@ID'. Start with list_runs, then show_checkpoint or read_state. Writes
(commit, fork, write_artifact) only append checkpoints; nothing is overwritten. The resource
agentfs://runs/RUN/latest is a run's newest checkpoint; subscribe to it to hear of new commits."""


def latest_uri(run: str) -> str:
    return f"{URI_PREFIX}{run}{URI_SUFFIX}"


def run_of(uri: str) -> str:
    """The run a latest-checkpoint URI names; NotFound for any other URI."""
    if not (uri.startswith(URI_PREFIX) and uri.endswith(URI_SUFFIX)) or len(uri) <= len(URI_PREFIX) + len(URI_SUFFIX):
        raise agentfs.NotFound(f"no resource {uri!r}: resources are {URI_PREFIX}RUN{URI_SUFFIX}")
    return uri[len(URI_PREFIX) : -len(URI_SUFFIX)]


@dataclasses.dataclass
class _Subscriber:
    uri: str
    connection: str
    session: ServerSession


class AgentFSServer:
    """The MCP server over one open store; `read_only` hides and refuses the tools that write."""

    def __init__(self, store: agentfs.Store, *, read_only: bool = False) -> None:
        self.store = store
        self.read_only = read_only
        self.tools: dict[str, ToolSpec] = {tool.name: tool for tool in ALL_TOOLS if tool.read_only or not read_only}
        self._refused = {tool.name for tool in ALL_TOOLS} - self.tools.keys()
        self._store_access = anyio.CapacityLimiter(1)
        self._bus = InMemorySubscriptionBus()
        self._subscribers: list[_Subscriber] = []
        self.server: Server[Any] = Server(
            "agentfs",
            version=agentfs.__version__,
            instructions=INSTRUCTIONS,
            on_list_tools=self._list_tools,
            on_call_tool=self._call_tool,
            on_list_resources=self._list_resources,
            on_list_resource_templates=self._list_resource_templates,
            on_read_resource=self._read_resource,
            on_subscribe_resource=self._subscribe,
            on_unsubscribe_resource=self._unsubscribe,
            on_subscriptions_listen=ListenHandler(self._bus),
        )

    async def _list_tools(self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[tool.describe() for tool in self.tools.values()])

    async def _call_tool(self, ctx: ServerRequestContext[Any], params: types.CallToolRequestParams) -> types.CallToolResult:
        tool = self.tools.get(params.name)
        if tool is None:
            if params.name in self._refused:
                return _tool_error(f"tool {params.name!r} writes to the store, and this server runs with --read-only")
            return _tool_error(f"no tool {params.name!r}; tools: {', '.join(self.tools)}")
        try:
            arguments = tool.arguments.model_validate(params.arguments or {})
        except ValidationError as exc:
            problems = "; ".join(f"{'.'.join(map(str, error['loc'])) or 'arguments'}: {error['msg']}" for error in exc.errors())
            return _tool_error(f"tool {tool.name!r}: invalid arguments: {problems}")
        try:
            document = await self._in_store(tool.handler, self.store, arguments)
        except (agentfs.AgentFSError, OSError) as exc:
            return _tool_error(str(exc))
        return types.CallToolResult(content=[types.TextContent(text=dumps(document))], structured_content=document)

    async def _list_resources(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourcesResult:
        def heads() -> list[str]:
            return [name for name in self.store.runs() if self.store.run(name).head_id() is not None]

        runs = await self._in_store(heads)
        return types.ListResourcesResult(
            resources=[
                types.Resource(
                    uri=latest_uri(run),
                    name=f"{run} (latest)",
                    description=f"the newest checkpoint of run {run!r}: metadata, artifacts and a preview of each state key",
                    mime_type="application/json",
                )
                for run in runs
            ]
        )

    async def _list_resource_templates(
        self, ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListResourceTemplatesResult:
        template = types.ResourceTemplate(
            uri_template=f"{URI_PREFIX}{{run}}{URI_SUFFIX}",
            name="latest checkpoint",
            description="a run's newest checkpoint; subscribe to hear of each new commit",
            mime_type="application/json",
        )
        return types.ListResourceTemplatesResult(resource_templates=[template])

    async def _read_resource(self, ctx: ServerRequestContext[Any], params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        def latest() -> dict[str, Any]:
            run = self.store.run(run_of(params.uri))
            head = run.latest()
            if head is None:
                raise agentfs.NotFound(f"run {run.name!r} not found: it has no checkpoints")
            return {**checkpoint_summary(head), "state": state_summary(head)}

        try:
            document = await self._in_store(latest)
        except (agentfs.NotFound, agentfs.InvalidName) as exc:
            raise MCPError(types.INVALID_PARAMS, str(exc), {"uri": params.uri}) from None
        except (agentfs.AgentFSError, OSError) as exc:
            raise MCPError(types.INTERNAL_ERROR, str(exc), {"uri": params.uri}) from None
        contents = types.TextResourceContents(uri=params.uri, mime_type="application/json", text=dumps(document))
        return types.ReadResourceResult(contents=[contents])

    async def _subscribe(self, ctx: ServerRequestContext[Any], params: types.SubscribeRequestParams) -> types.EmptyResult:
        try:
            self.store.run(run_of(params.uri))  # checks the name; a run may be subscribed to before its first commit
        except (agentfs.NotFound, agentfs.InvalidName) as exc:
            raise MCPError(types.INVALID_PARAMS, str(exc), {"uri": params.uri}) from None
        connection = _connection_of(ctx)
        if not any(item.uri == params.uri and item.connection == connection for item in self._subscribers):
            self._subscribers.append(_Subscriber(params.uri, connection, ctx.session))
        return types.EmptyResult()

    async def _unsubscribe(self, ctx: ServerRequestContext[Any], params: types.UnsubscribeRequestParams) -> types.EmptyResult:
        connection = _connection_of(ctx)
        self._subscribers = [item for item in self._subscribers if (item.uri, item.connection) != (params.uri, connection)]
        return types.EmptyResult()

    async def _in_store(self, fn: Callable[..., T], *args: Any) -> T:
        return await anyio.to_thread.run_sync(fn, *args, limiter=self._store_access)

    async def relay_commits(self) -> None:
        """Tell subscribers of a run's latest checkpoint about each new checkpoint of it, from any process."""
        watch = self.store.watch()
        try:
            while True:
                try:
                    checkpoint = await anyio.to_thread.run_sync(next, watch, None, abandon_on_cancel=True)
                except agentfs.AgentFSError as exc:  # a damaged entry: report it, keep watching the others
                    log.warning("agentfs mcp: a new checkpoint could not be read: %s", exc)
                    continue
                if checkpoint is None:
                    return
                await self._updated(latest_uri(checkpoint.run))
        finally:
            watch.close()  # ends a next() still waiting on the worker thread

    async def _updated(self, uri: str) -> None:
        await self._bus.publish(ResourceUpdated(uri=uri))  # subscriptions/listen streams (2026-07-28 and later)
        for subscriber in [item for item in self._subscribers if item.uri == uri]:
            delivered = False
            with anyio.move_on_after(NOTIFY_TIMEOUT):
                try:
                    await subscriber.session.send_resource_updated(uri)
                    delivered = True
                except Exception:  # fan-out boundary: a connection that went away must not stop the others
                    log.info("dropping the subscription of connection %s to %s: it is gone", subscriber.connection, uri)
            if not delivered and subscriber in self._subscribers:
                self._subscribers.remove(subscriber)


def _tool_error(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=message)], is_error=True)


def _connection_of(ctx: ServerRequestContext[Any]) -> str:
    """The connection a request came on: its streamable HTTP session id, else the one stdio connection."""
    headers = getattr(ctx.request, "headers", None)
    session_id = headers.get("mcp-session-id") if headers is not None else None
    return session_id or STDIO_CONNECTION


async def serve_stdio(app: AgentFSServer) -> None:
    """Serve one client on stdin/stdout until it closes them."""
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(app.relay_commits)
        async with stdio_server() as (read_stream, write_stream):
            await app.server.run(read_stream, write_stream, app.server.create_initialization_options())
        tasks.cancel_scope.cancel()


async def serve_http(app: AgentFSServer, host: str, port: int) -> None:
    """Serve streamable HTTP at http://HOST:PORT/mcp until SIGINT or SIGTERM; port 0 picks a free port.

    The address is printed on stderr once the socket listens, so a caller can connect without guessing.
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((host, port))
    listener.listen(128)  # before the address is printed: a client that connects at once waits in the backlog
    bound_port = listener.getsockname()[1]
    http_app = app.server.streamable_http_app(host=host)
    config = uvicorn.Config(http_app, log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    if threading.current_thread() is threading.main_thread():
        # uvicorn handles SIGINT and SIGTERM while it serves, then raises the signal again under the handlers it found:
        # these make that a normal return (exit 0), and stop a server that is signalled before it took over
        def stop(_signum: int, _frame: object) -> None:
            server.should_exit = True

        signal.signal(signal.SIGTERM, stop)
        signal.signal(signal.SIGINT, stop)
    shown_host = f"[{host}]" if family == socket.AF_INET6 else host
    async with anyio.create_task_group() as tasks:
        tasks.start_soon(app.relay_commits)
        print(f"agentfs mcp: serving http://{shown_host}:{bound_port}/mcp", file=sys.stderr, flush=True)
        await server.serve(sockets=[listener])
        tasks.cancel_scope.cancel()


def serve(store: agentfs.Store, *, read_only: bool = False, http: tuple[str, int] | None = None) -> None:
    """Serve `store` on stdio, or on streamable HTTP at `http` = (host, port); returns when the client or a signal ends it."""
    app = AgentFSServer(store, read_only=read_only)
    if http is None:
        anyio.run(serve_stdio, app)
    else:
        anyio.run(serve_http, app, *http)
