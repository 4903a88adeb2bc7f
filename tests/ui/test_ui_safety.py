"""agentfs ui's request checks and escaping, through Starlette's test client (the browser tests drive the same in
chromium): token, Host, Origin, CSP; store content escaped; Markdown sanitised; HTML and SVG never rendered."""

from __future__ import annotations

import re
import socket
from pathlib import Path

import pytest
from starlette.testclient import TestClient

import agentfs
from agentfs.ui.app import Settings, create_app
from agentfs.ui.previews import render_markdown
from agentfs.ui.security import COOKIE, Guard
from tests.ui_fixtures import XSS_MARKDOWN, build_demo

PORT = 8123
BASE = f"http://127.0.0.1:{PORT}"


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, str]]:
    root = tmp_path_factory.mktemp("ui-safety")
    return root / "store", build_demo(root)


def client(store: agentfs.Store, *, writes: bool = False, token: bool = True) -> tuple[TestClient, Guard]:
    guard = Guard()
    guard.serve_at("127.0.0.1", PORT)
    app = create_app(store, guard, Settings(allow_writes=writes, user="tester", source="test"))
    test_client = TestClient(app, base_url=BASE, follow_redirects=False)
    if token:
        test_client.cookies.set(COOKIE, guard.token)
    return test_client, guard


def test_missing_or_wrong_token_is_refused(demo: tuple[Path, dict[str, str]]) -> None:
    with agentfs.open(demo[0]) as store:
        anonymous, guard = client(store, token=False)
        for path in ("/", "/run?name=research", "/static/ui.js", "/events", "/nowhere"):
            assert anonymous.get(path).status_code == 403, path
        assert anonymous.get("/?token=wrong" + guard.token).status_code == 403
        anonymous.cookies.set(COOKIE, guard.token[:-1])
        assert anonymous.get("/").status_code == 403
        first = TestClient(anonymous.app, base_url=BASE, follow_redirects=False).get(f"/run?name=research&token={guard.token}")
        assert first.status_code == 303 and first.headers["location"] == "/run?name=research"  # the token leaves the URL
        assert f"{COOKIE}={guard.token}" in first.headers["set-cookie"] and "HttpOnly" in first.headers["set-cookie"]
        assert "SameSite=Strict" in first.headers["set-cookie"]


def test_foreign_host_is_refused(demo: tuple[Path, dict[str, str]]) -> None:
    with agentfs.open(demo[0]) as store:
        browser, _guard = client(store)
        assert browser.get("/").status_code == 200
        assert browser.get("/", headers={"host": f"localhost:{PORT}"}).status_code == 200
        assert browser.get("/", headers={"host": f"evil.example:{PORT}"}).status_code == 403  # DNS rebinding
        assert browser.get("/", headers={"host": "127.0.0.1:9999"}).status_code == 403


def test_wildcard_bind_accepts_this_machines_names() -> None:
    """`--host 0.0.0.0` is reached by the machine's address or name: those pass; a foreign DNS name (rebinding) still does not."""
    guard = Guard()
    guard.serve_at("0.0.0.0", PORT, ("agents.internal",))
    for accepted in ("192.0.2.7", "[2001:db8::1]", "127.0.0.1", "localhost", socket.gethostname(), "AGENTS.internal"):
        assert guard.accepts_host(f"{accepted}:{PORT}"), accepted
        assert guard.accepts_origin(f"http://{accepted}:{PORT}"), accepted
    for refused in (f"evil.example:{PORT}", f"192.0.2.7:{PORT + 1}", "192.0.2.7", f":{PORT}", None):
        assert not guard.accepts_host(refused), refused
    assert not guard.accepts_origin(f"https://192.0.2.7:{PORT}")  # not the scheme served
    loopback = Guard()
    loopback.serve_at("127.0.0.1", PORT)
    assert not loopback.accepts_host(f"{socket.gethostname()}:{PORT}") or socket.gethostname() == "localhost"


def test_cross_origin_post_is_refused(demo: tuple[Path, dict[str, str]]) -> None:
    with agentfs.open(demo[0]) as store:
        browser, _guard = client(store, writes=True)
        head = store.run("research").head_id()
        assert head is not None
        form = {"run": "research", "id": head, "note": "looks fine"}
        assert browser.post("/act/note", data=form, headers={"origin": "http://evil.example"}).status_code == 403
        assert browser.post("/act/note", data=form).status_code == 403  # no Origin at all
        assert browser.get("/", headers={"origin": "http://evil.example"}).status_code == 403
        assert store.run("agentfs-ui/audit/research").head_id() is None  # nothing was recorded
        done = browser.post("/act/note", data=form, headers={"origin": BASE})
        assert done.status_code == 303
        assert store.run("agentfs-ui/audit/research").latest().state["user"] == "tester"  # type: ignore[union-attr]


def test_every_response_carries_a_policy_without_inline_or_remote_script(demo: tuple[Path, dict[str, str]]) -> None:
    with agentfs.open(demo[0]) as store:
        browser, _guard = client(store)
        for response in (browser.get("/"), browser.get("/nowhere"), browser.get("/static/ui.js"), browser.get("/run?name=nothing")):
            policy = response.headers["content-security-policy"]
            assert "script-src 'self';" in policy and "unsafe-inline" not in policy.split("style-src")[0]
            assert response.headers["x-content-type-options"] == "nosniff"


def test_writes_have_no_endpoint_without_allow_writes(demo: tuple[Path, dict[str, str]]) -> None:
    with agentfs.open(demo[0]) as store:
        browser, _guard = client(store)
        head = store.run("research").head_id()
        assert head is not None
        for action in ("edit", "fork", "abandon", "note"):
            response = browser.post(f"/act/{action}", data={"run": "research", "id": head, "state": "{}"}, headers={"origin": BASE})
            assert response.status_code == 404, action
        page = browser.get(f"/checkpoint?run=research&id={head}").text
        assert "/act/" not in page and '<form class="act"' not in page


def test_store_content_is_escaped(demo: tuple[Path, dict[str, str]]) -> None:
    with agentfs.open(demo[0]) as store:
        browser, _guard = client(store)
        evil = store.run("evil").head_id()
        pages = [browser.get("/").text, browser.get("/run?name=evil").text, browser.get(f"/checkpoint?run=evil&id={evil}").text]
        for html in pages:
            assert "<script>alert" not in html and "<img src=x" not in html
            assert re.search(r"<[^>]+\son\w+=", html) is None  # no event handler attribute anywhere
        checkpoint = pages[2]
        assert "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;" in checkpoint  # shown, as text
        assert "HTML or SVG: shown as text" in checkpoint


def test_markdown_is_rendered_and_sanitised() -> None:
    html = str(render_markdown(XSS_MARKDOWN.decode()))
    assert "<h1>Report</h1>" in html and "<strong>bold</strong>" in html
    assert "<script" not in html and "&lt;script&gt;" in html  # raw HTML stays text
    assert 'href="javascript' not in html and "[click](javascript:alert(5))" in html  # a javascript: link is not made
    assert "<img" not in html


def test_artifacts_are_inline_only_as_raster_images(demo: tuple[Path, dict[str, str]]) -> None:
    with agentfs.open(demo[0]) as store:
        browser, _guard = client(store)
        second = demo[1]["second"]
        image = browser.get(f"/artifact?run=research&id={second}&name=chart.png&inline=1")
        assert image.headers["content-type"] == "image/png" and image.content.startswith(b"\x89PNG")
        for name in ("icon.svg", "page.html", "report.md"):
            served = browser.get(f"/artifact?run=research&id={second}&name={name}&inline=1")
            assert served.headers["content-type"] == "application/octet-stream", name
            assert served.headers["content-disposition"].startswith("attachment"), name


def test_bad_requests_get_an_error_page_never_a_crash(demo: tuple[Path, dict[str, str]]) -> None:
    with agentfs.open(demo[0]) as store:
        browser, _guard = client(store)
        second = demo[1]["second"]
        expected = {
            "/run?name=nothing": 404,
            "/run?name=../etc": 400,
            "/run?name=research&page=999999999999": 200,
            "/run?name=research&page=-1": 200,
            "/checkpoint?run=research&id=nope": 400,
            "/checkpoint?run=research&id=01M8DSY2EYP5SXQQTHBFZKVPTD": 404,
            "/checkpoint": 400,
            f"/value?run=research&id={second}": 404,
            f"/value?run=research&id={second}&path=big&path=missing": 404,
            f"/value?run=research&id={second}&path=notes&path=99": 404,
            f"/artifact?run=research&id={second}&name=missing.txt": 404,
            f"/artifact?run=research&id={second}&name=../x": 400,
            f"/diff?a_run=research&a={second}&b=": 400,
            "/journal?run=": 400,
            "/thread?id=nobody": 404,
            "/session?id=nobody": 404,
            "/?page=abc&name=%00&meta=%3D": 200,
        }
        for path, status in expected.items():
            response = browser.get(path)
            assert response.status_code == status, (path, response.status_code, response.text[-300:])
            assert "Traceback" not in response.text


def test_runs_list_shows_sync_state_and_divergence(demo: tuple[Path, dict[str, str]]) -> None:
    with agentfs.open(demo[0]) as store:
        browser, _guard = client(store)
        html = browser.get("/").text
        remote = (demo[0].parent / "remote").as_uri()
        assert f"<th>{remote}</th>" in html
        research = html.split('href="/run?name=research"')[1].split("</tr>")[0]
        assert "1 not pushed" in research and "diverged" in research  # the pulled line is there; this store's own is not pushed
        evil = html.split('href="/run?name=evil"')[1].split("</tr>")[0]
        assert "<td>pushed</td>" in evil and "diverged" not in evil
        assert browser.get("/?meta=agent%3Dforker").text.count('class="run-link"') == 1
        assert browser.get("/?name=FORK").text.count('class="run-link"') == 1
