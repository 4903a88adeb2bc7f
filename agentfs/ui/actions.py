"""What people can do with `agentfs ui --allow-writes`: fork, edit state and commit it on top of the checkpoint it
was read from (`parent=`, so a moved head is a conflict shown on the page, never an overwrite), abandon an
in-flight tool call, leave a review note. Each is recorded with who did it in the run's audit run
(listing.AUDIT_PREFIX + run), which the run page shows as its audit trail."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response
from starlette.routing import Route

import agentfs

from .listing import AUDIT_PREFIX

if TYPE_CHECKING:
    from .app import Pages

MAX_NOTE = 4000


def record(store: agentfs.Store, user: str, run: str, action: str, checkpoint: str | None, detail: str) -> None:
    store.run(AUDIT_PREFIX + run).commit({"action": action, "user": user, "run": run, "checkpoint": checkpoint, "detail": detail})


def _to(path: str, **params: str) -> RedirectResponse:
    query = "&".join(f"{key}={quote(value, safe='')}" for key, value in params.items())
    return RedirectResponse(f"{path}?{query}", status_code=303)


def routes(pages: Pages) -> list[Route]:
    store, user = pages.store, pages.settings.user

    async def form(request: Request) -> dict[str, str]:
        data = await request.form()
        return {key: value for key, value in data.items() if isinstance(value, str)}

    async def fork(request: Request) -> Response:
        fields = await form(request)
        run, checkpoint_id, new_name = fields.get("run", ""), fields.get("id", ""), fields.get("new_name", "")
        await store.to_thread(store.run(run).fork, checkpoint_id, new_name)
        await store.to_thread(record, store, user, run, "fork", checkpoint_id, f"forked to {new_name}")
        return _to("/run", name=new_name)

    async def edit(request: Request) -> Response:
        fields = await form(request)
        run, parent = fields.get("run", ""), fields.get("id", "")
        try:
            state = json.loads(fields.get("state", ""))
        except ValueError as exc:
            return _to("/checkpoint", run=run, id=parent, message=f"not committed: the state is not valid JSON ({exc})")
        source = await store.to_thread(store.run(run).get, parent)

        def commit() -> Any:
            metadata = {**source.metadata, "agentfs_ui": {"action": "edit", "user": user, "from": parent}}
            return store.run(run).commit(state, parent=parent, metadata=metadata, artifacts=dict(source.artifacts))

        try:
            committed = await store.to_thread(commit)
        except agentfs.Conflict as exc:
            return _to("/checkpoint", run=run, id=parent, message=f"conflict, nothing committed: {exc}")
        await store.to_thread(record, store, user, run, "edit", committed.id, f"edited state of {parent}")
        return _to("/checkpoint", run=run, id=committed.id, message=f"committed {committed.id} on top of {parent}")

    async def abandon(request: Request) -> Response:
        fields = await form(request)
        run, key, reason = fields.get("run", ""), fields.get("key", ""), fields.get("reason", "").strip()[:MAX_NOTE]
        await store.to_thread(store.run(run).journal.abandon, key, f"{reason or 'no reason given'} (by {user} in agentfs ui)")
        await store.to_thread(record, store, user, run, "abandon", None, f"abandoned call {key!r}: {reason}")
        return _to("/journal", run=run)

    async def note(request: Request) -> Response:
        fields = await form(request)
        run, checkpoint_id, text = fields.get("run", ""), fields.get("id", ""), fields.get("note", "").strip()[:MAX_NOTE]
        await store.to_thread(store.run(run).get, checkpoint_id)  # a note names a checkpoint that exists
        await store.to_thread(record, store, user, run, "note", checkpoint_id, text)
        return _to("/run", name=run)

    def guarded(handler: Any) -> Any:
        async def act(request: Request) -> Response:
            try:
                response: Response = await handler(request)
                return response
            except agentfs.NotFound as exc:
                return pages.render("error.html", 404, message=str(exc))
            except agentfs.AgentFSError as exc:
                return pages.render("error.html", 400, message=str(exc))

        return act

    return [Route(f"/act/{handler.__name__}", guarded(handler), methods=["POST"]) for handler in (fork, edit, abandon, note)]
