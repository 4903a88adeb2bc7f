"""Start `agentfs ui`: bind (port 0: one the OS picks), print the URL with this launch's token as the first line of
stdout, then serve until interrupted."""

from __future__ import annotations

import socket
import sys

import uvicorn

import agentfs

from .app import Settings, create_app
from .security import Guard


def serve(store: agentfs.Store, host: str, port: int, settings: Settings, allowed_names: tuple[str, ...] = ()) -> None:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((host, port))
    listener.listen(128)
    bound = listener.getsockname()[1]
    guard = Guard()
    guard.serve_at(host, bound, allowed_names)
    app = create_app(store, guard, settings)
    shown = f"[{host}]" if ":" in host else host
    print(f"http://{shown}:{bound}/?token={guard.token}", flush=True)
    print(
        f"agentfs ui: serving {settings.source} ({'writes allowed' if settings.allow_writes else 'read-only'}); Ctrl-C stops",
        file=sys.stderr,
        flush=True,
    )
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off", timeout_graceful_shutdown=1)
    uvicorn.Server(config).run(sockets=[listener])
