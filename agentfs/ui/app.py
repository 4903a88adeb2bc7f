"""The Starlette application of `agentfs ui`: read-only pages, and with `allow_writes` the action endpoints
(actions.py), which do not exist otherwise (tests/ui/test_ui_browser.py::test_writes_refused_without_allow_writes)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

import agentfs

from ..integrations.conversations import session_conversation
from ..integrations.langgraph_conversation import thread_conversation
from . import actions
from .lineage import Heads
from .listing import RunsPage, remote_label
from .previews import at_path, image_type, tree
from .security import Guard, GuardMiddleware
from .views import checkpoint_view, diff_view, journal_view, run_view

STATIC = Path(__file__).parent / "static"
LIVE_POLL = 0.5  # seconds: how often the event stream checks that its client is still there


@dataclass
class Settings:
    allow_writes: bool = False
    user: str = "unknown"
    source: str = ""  # what the pages say they show: the store path or the remote URL


def _link(**params: Any) -> str:
    return "&".join(f"{key}={quote(str(value), safe='')}" for key, value in params.items())


templates = Environment(
    loader=PackageLoader("agentfs.ui", "templates"), autoescape=select_autoescape(default=True, default_for_string=True)
)
templates.globals["q"] = _link
templates.filters["remote"] = remote_label
templates.filters["when"] = lambda value: value.strftime("%Y-%m-%d %H:%M:%S") if value else "-"


def _human_bytes(size: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024  # type: ignore[assignment]
    return f"{size} B"


templates.filters["bytes"] = _human_bytes


class Pages:
    def __init__(self, store: agentfs.Store, settings: Settings) -> None:
        self.store = store
        self.settings = settings
        self.heads = Heads(store)
        self.runs = RunsPage(store, self.heads)

    def render(self, template: str, status: int = 200, **context: Any) -> HTMLResponse:
        if self.store.remote is not None:  # a remote is browsed without live updates (watch reads local segments)
            context.pop("live", None)
        html = templates.get_template(template).render(settings=self.settings, **context)
        return HTMLResponse(html, status_code=status)

    def index(self, request: Request) -> Response:
        query = request.query_params
        page = _page(query.get("page"))
        listing = self.runs.listing(query.get("name", ""), query.get("meta", ""), page)
        return self.render("runs.html", listing=listing, name=query.get("name", ""), meta=query.get("meta", ""), live="*")

    def run(self, request: Request) -> Response:
        name = request.query_params.get("name", "")
        view = run_view(self.store, self.heads, name, _page(request.query_params.get("page")))
        return self.render("run.html", view=view, live=name)

    def checkpoint(self, request: Request) -> Response:
        query = request.query_params
        view = checkpoint_view(self.store, query.get("run", ""), query.get("id", ""))
        return self.render("checkpoint.html", view=view, message=query.get("message"))

    def value(self, request: Request) -> Response:
        """One state value's subtree, as an HTML fragment a tree node loads when opened."""
        query = request.query_params
        checkpoint = self.store.run(query.get("run", "")).get(query.get("id", ""))
        path = query.getlist("path")
        if not path:
            raise agentfs.NotFound("a value is named by at least one path step (the state key)")
        value = at_path(checkpoint.value(path[0]), path[1:])
        return self.render("value.html", node=tree(value, path[-1], list(path), 0), checkpoint=checkpoint)

    def artifact(self, request: Request) -> Response:
        """An artifact's bytes: inline only when they are a raster image, else as a download of octets."""
        query = request.query_params
        artifact = self.store.run(query.get("run", "")).get(query.get("id", "")).artifacts[query.get("name", "")]
        stream = artifact.open()
        kind = image_type(stream.peek(16)[:16]) if query.get("inline") else None
        headers = {} if kind else {"content-disposition": f"attachment; filename*=UTF-8''{quote(artifact.name.rsplit('/', 1)[-1])}"}
        return StreamingResponse(_chunks(stream), media_type=kind or "application/octet-stream", headers=headers)

    def diff(self, request: Request) -> Response:
        query = request.query_params
        a = self.store.run(query.get("a_run", "")).get(query.get("a", ""))
        b = self.store.run(query.get("b_run", "") or query.get("a_run", "")).get(query.get("b", ""))
        return self.render("diff.html", view=diff_view(self.store, a, b))

    def journal(self, request: Request) -> Response:
        name = request.query_params.get("run", "")
        return self.render("journal.html", run=name, calls=journal_view(self.store, name), live=name)

    def thread(self, request: Request) -> Response:
        query = request.query_params
        conversation = thread_conversation(self.store, query.get("id", ""), checkpoint_id=query.get("at") or None, ns=query.get("ns", ""))
        return self.render("conversation.html", conversation=conversation, ns=query.get("ns", ""))

    def session(self, request: Request) -> Response:
        query = request.query_params
        conversation = session_conversation(
            self.store, query.get("id", ""), branch=query.get("branch", "main"), checkpoint_id=query.get("at") or None
        )
        return self.render("conversation.html", conversation=conversation, ns="")

    async def events(self, request: Request) -> Response:
        """Server-sent events: one `data: RUN ID` line per checkpoint any process commits (of `run`, or of any)."""
        run = request.query_params.get("run") or None
        if run == "*":
            run = None

        async def stream() -> AsyncIterator[bytes]:
            yield b"retry: 1000\n\n"
            async with self.store.awatch(run, timeout=None) as changes:
                iterator = changes.__aiter__()
                while not await request.is_disconnected():
                    try:
                        checkpoint = await asyncio.wait_for(iterator.__anext__(), LIVE_POLL)
                    except asyncio.TimeoutError:
                        yield b": keep-alive\n\n"
                        continue
                    yield f"data: {json.dumps({'run': checkpoint.run, 'id': checkpoint.id})}\n\n".encode()

        return StreamingResponse(stream(), media_type="text/event-stream")


def _chunks(stream: Any) -> Any:
    with stream:
        while chunk := stream.read(1 << 16):
            yield chunk


def _page(text: str | None) -> int:
    return int(text) if text and text.isdigit() and len(text) < 9 else 0


def create_app(store: agentfs.Store, guard: Guard, settings: Settings) -> Starlette:
    pages = Pages(store, settings)
    routes = [
        Route("/", _safe(pages, pages.index)),
        Route("/run", _safe(pages, pages.run)),
        Route("/checkpoint", _safe(pages, pages.checkpoint)),
        Route("/value", _safe(pages, pages.value)),
        Route("/artifact", _safe(pages, pages.artifact)),
        Route("/diff", _safe(pages, pages.diff)),
        Route("/journal", _safe(pages, pages.journal)),
        Route("/thread", _safe(pages, pages.thread)),
        Route("/session", _safe(pages, pages.session)),
        Mount("/static", StaticFiles(directory=STATIC), name="static"),
    ]
    if store.remote is None:  # a remote's runs are looked at when shown: listing them all is one request each
        routes.append(Route("/events", pages.events))
        pages.heads.warm()
    if settings.allow_writes:
        routes += actions.routes(pages)
    app = Starlette(routes=routes)
    app.add_middleware(GuardMiddleware, guard=guard)
    return app


def _safe(pages: Pages, handler: Any) -> Any:
    """A page handler whose agentfs errors become an error page (404 for a name that is not there), not a 500."""

    def page(request: Request) -> Response:
        try:
            response: Response = handler(request)
            return response
        except agentfs.NotFound as exc:
            return pages.render("error.html", 404, message=str(exc))
        except agentfs.AgentFSError as exc:
            return pages.render("error.html", 400, message=str(exc))

    return page
