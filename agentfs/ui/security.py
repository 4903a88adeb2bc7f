"""What every request to `agentfs ui` passes before a page is made: the launch token, Host, Origin, and the headers
that keep store content from running script in the page.

- The token is random per launch and printed in the URL; a request carrying it as `?token=` gets it as an
  HttpOnly, SameSite=Strict cookie and is redirected to the same URL without it. Any request without the
  token (query or cookie) is refused with 403 (tests/ui/test_ui_safety.py::test_missing_or_wrong_token_is_refused).
- Host must name the address served (DNS rebinding: a page of another site resolving its name to 127.0.0.1
  sends its own Host) (test_foreign_host_is_refused). The port must be the one served; the name must be an IP
  literal (a rebinding page cannot send one: the attack needs the attacker's own DNS name), `localhost`, the name
  bound with --host, or, on a wildcard bind (0.0.0.0, ::), this machine's host names and any --allow-host name
  (test_wildcard_bind_accepts_this_machines_names).
- A request carrying Origin must come from this origin, and a request that is not GET or HEAD must carry it
  (another site's form post) (test_cross_origin_post_is_refused).
- Every response carries a Content-Security-Policy allowing scripts only from this origin's /static/ files: no
  inline script, no event handler attribute, no remote script (test_store_content_runs_no_script, in a browser).
"""

from __future__ import annotations

import hmac
import ipaddress
import secrets
import socket
from dataclasses import dataclass, field
from http.cookies import SimpleCookie
from urllib.parse import parse_qsl, urlencode

from starlette.datastructures import Headers, MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

COOKIE = "agentfs_ui_token"
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "frame-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'self'"
)
SANDBOX_CSP = "sandbox; default-src 'none'; img-src data:; style-src 'unsafe-inline'"  # an HTML artifact in its frame: no script at all
SAFE_METHODS = ("GET", "HEAD")


WILDCARD_BINDS = ("0.0.0.0", "::", "")


@dataclass
class Guard:
    """The launch's secret and the addresses it answers on."""

    token: str = field(default_factory=lambda: secrets.token_urlsafe(24))
    port: int = 0
    names: set[str] = field(default_factory=set)  # DNS names accepted in Host (lower case); IP literals always are

    def serve_at(self, host: str, port: int, allowed_names: tuple[str, ...] = ()) -> None:
        self.port = port
        names = {"localhost", host, *allowed_names}
        if host in WILDCARD_BINDS:  # reached by any of this machine's names
            names |= {socket.gethostname(), socket.getfqdn()}
        self.names = {name.lower() for name in names if name}

    def accepts_host(self, value: str | None) -> bool:
        """Whether a Host header (`name:port`, `[v6]:port`) names this server."""
        if value is None:
            return False
        name, _, port = value.rpartition(":")
        if port != str(self.port) or not name:
            return False
        name = name[1:-1] if name.startswith("[") and name.endswith("]") else name
        try:
            ipaddress.ip_address(name)
        except ValueError:
            return name.lower() in self.names
        return True

    def accepts_origin(self, origin: str) -> bool:
        scheme, _, host = origin.partition("://")
        return scheme == "http" and self.accepts_host(host)

    def valid(self, candidate: str | None) -> bool:
        return candidate is not None and hmac.compare_digest(candidate.encode(), self.token.encode())


class GuardMiddleware:
    """Refuses requests that fail a check of `guard`; adds the security headers to every response."""

    def __init__(self, app: ASGIApp, guard: Guard) -> None:
        self.app = app
        self.guard = guard

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        problem = self._problem(scope, headers)
        if problem is not None:
            await _plain(send, 403, f"agentfs ui: {problem}\n")
            return
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        if "token" in query:  # first visit from the printed URL: move the token into a cookie
            rest = urlencode({key: value for key, value in query.items() if key != "token"})
            location = scope["path"] + (f"?{rest}" if rest else "")
            cookie = f"{COOKIE}={self.guard.token}; Path=/; HttpOnly; SameSite=Strict"
            await send(
                {
                    "type": "http.response.start",
                    "status": 303,
                    "headers": [(b"location", location.encode()), (b"set-cookie", cookie.encode()), *_security_headers()],
                }
            )
            await send({"type": "http.response.body", "body": b""})
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                response_headers = MutableHeaders(scope=message)
                for key, value in _security_headers():
                    if key.decode() not in response_headers:
                        response_headers.append(key.decode(), value.decode())
            await send(message)

        await self.app(scope, receive, send_with_headers)

    def _problem(self, scope: Scope, headers: Headers) -> str | None:
        if not self.guard.accepts_host(headers.get("host")):
            return "refused: this Host is not the address agentfs ui serves"
        origin = headers.get("origin")
        if origin is not None and not self.guard.accepts_origin(origin):
            return "refused: a request from another origin"
        if origin is None and scope["method"] not in SAFE_METHODS:
            return "refused: a write without an Origin header"
        query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
        cookie = SimpleCookie()
        cookie.load(headers.get("cookie", ""))
        sent = query.get("token") or (cookie[COOKIE].value if COOKIE in cookie else None)
        if not self.guard.valid(sent):
            return "refused: open the URL agentfs ui printed (it carries this launch's token)"
        return None


def _security_headers() -> list[tuple[bytes, bytes]]:
    return [
        (b"content-security-policy", CSP.encode()),
        (b"x-content-type-options", b"nosniff"),
        (b"referrer-policy", b"same-origin"),  # no-referrer would make a form post send `Origin: null`
        (b"x-frame-options", b"SAMEORIGIN"),
        (b"cache-control", b"no-store"),
    ]


async def _plain(send: Send, status: int, text: str) -> None:
    body = text.encode()
    headers = [(b"content-type", b"text/plain; charset=utf-8"), (b"content-length", str(len(body)).encode()), *_security_headers()]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
