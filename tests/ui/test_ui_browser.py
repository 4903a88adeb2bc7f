"""agentfs ui in a real browser: Debian's chromium driven by Playwright (`make chromium` installs it; in CI a missing
browser fails these tests). Each server is a real `agentfs ui` process; screenshots go to .ui-screenshots/."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, sync_playwright

import agentfs
from tests.ui_fixtures import XSS_THREAD, build_demo, build_langgraph_thread

CHROMIUM = Path("/usr/bin/chromium")
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
        "--disable-component-update", "--disable-sync"]  # fmt: skip
SHOTS = Path(__file__).resolve().parents[2] / ".ui-screenshots"
LIVE_WITHIN = 2.0  # seconds: a commit by another process shows on an open page within this
Demo = tuple[Path, dict[str, str]]  # the store, and the ids build_demo returned


@dataclass
class Server:
    url: str  # with the token
    process: subprocess.Popen[str]

    @property
    def base(self) -> str:
        return self.url.split("/?token=")[0]


def start(store: Path, *flags: str) -> Server:
    command = [sys.executable, "-m", "agentfs.cli.main", "--store", str(store), "ui", "--port", "0", "--user", "alice", *flags]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert process.stdout is not None
    url = process.stdout.readline().strip()  # the first line of stdout is the URL with this launch's token
    assert url.startswith("http://127.0.0.1:") and "/?token=" in url, url
    return Server(url, process)


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Demo:
    root = tmp_path_factory.mktemp("ui-browser")
    ids = build_demo(root)
    build_langgraph_thread(root / "store", "chat-1")
    build_langgraph_thread(root / "store", XSS_THREAD)
    return root / "store", ids


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not CHROMIUM.exists():
        message = f"{CHROMIUM} is missing: run `make chromium` (apt-get install chromium)"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    SHOTS.mkdir(exist_ok=True)
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        yield launched
        launched.close()


@pytest.fixture(scope="module")
def readonly(demo: tuple[Path, dict[str, str]]) -> Iterator[Server]:
    server = start(demo[0])
    yield server
    server.process.terminate()
    server.process.wait(10)


@dataclass
class Watched:
    """A page with every dialog (alert, confirm) and console message it produced."""

    page: Page
    dialogs: list[str] = field(default_factory=list)
    console: list[str] = field(default_factory=list)

    def shot(self, name: str) -> None:
        self.page.screenshot(path=str(SHOTS / f"{name}.png"), full_page=True)


def open_page(browser: Browser, server: Server) -> Watched:
    page = browser.new_context(viewport={"width": 1280, "height": 800}).new_page()
    watched = Watched(page)
    page.on("dialog", lambda dialog: (watched.dialogs.append(dialog.message), dialog.dismiss()))
    page.on("console", lambda message: watched.console.append(message.text))
    page.on("pageerror", lambda error: watched.console.append(str(error)))
    page.goto(server.url)
    return watched


def test_click_through_runs_run_checkpoint_artifacts_diff_journal(browser: Browser, readonly: Server, demo: Demo) -> None:
    ids = demo[1]
    watched = open_page(browser, readonly)
    page = watched.page
    assert page.url == readonly.base + "/"  # the token moved into a cookie
    assert page.locator("#runs tr.run.diverged a", has_text="research").count() == 1
    watched.shot("01-runs")
    page.locator("#runs a.run-link", has_text="research").first.click()
    assert page.locator("#divergence").inner_text() == "diverged: 2 heads"
    assert page.locator("tr.cp-row.divergent").count() == 2 and page.locator("circle.divergent").count() == 2
    assert page.locator(f"tr[data-id='{ids['second']}'] a.fork", has_text="research-fork").count() == 1
    watched.shot("02-run")
    page.locator(f"tr[data-id='{ids['second']}'] a.cp-link").click()
    image = page.locator("section[data-name='chart.png'] img.preview")
    assert image.evaluate("img => img.complete && img.naturalWidth") == 4  # the PNG loaded inline
    markdown = page.locator("section[data-name='report.md'] .markdown")
    assert markdown.locator("h1").inner_text() == "Report" and markdown.locator("strong").inner_text() == "bold"
    assert markdown.locator("script, img, a[href^='javascript']").count() == 0
    assert page.locator("section[data-name='data.csv'] table.csv td", has_text="<b>beta</b>").count() == 1
    assert "00000000  00 01 02 03" in page.locator("section[data-name='blob.bin'] pre.hex").inner_text()
    assert "<script>alert(10)</script>" in page.locator("section[data-name='icon.svg'] pre.text").inner_text()
    lazy = page.locator("#state details.lazy").first  # `big` loads when opened
    lazy.locator("summary").click()
    page.wait_for_selector("#state details.lazy .children .leaf")
    watched.shot("03-checkpoint")
    page.locator("#diff-parent").click()
    state_diff = page.locator("#state-diff").inner_text()
    assert "added: big" in state_diff and "changed: notes" in state_diff and '+ [1] "searched"' in state_diff
    assert page.locator("#artifact-diff").inner_text().count("added:") == 7
    watched.shot("04-diff")
    page.goto(f"{readonly.base}/run?name=research")
    page.locator("#journal-link").click()
    in_flight = page.locator("tr.call.in_flight")
    assert in_flight.count() == 1 and "write_report" in in_flight.inner_text() and "in flight" in in_flight.inner_text()
    assert page.locator("tr.call.ok", has_text="search").count() == 1
    watched.shot("05-journal")
    assert watched.dialogs == [] and watched.console == []


def test_langgraph_thread_reads_as_a_conversation(browser: Browser, readonly: Server) -> None:
    watched = open_page(browser, readonly)
    page = watched.page
    page.locator("#runs a.thread-link", has_text="chat-1").click()
    messages = page.locator("#conversation .message")
    roles = [messages.nth(index).get_attribute("class") for index in range(messages.count())]
    assert roles == ["message human", "message ai", "message tool", "message interrupt"]
    assert "What is the weather in Paris?" in messages.nth(0).inner_text()
    assert "lookup" in messages.nth(1).locator(".tool-call").inner_text() and "Paris" in messages.nth(1).inner_text()
    assert "18 degrees, sunny" in messages.nth(2).inner_text() and "answers call-1" in messages.nth(2).inner_text()
    assert "Send this answer?" in page.locator("#interrupt").inner_text()
    assert page.locator("#steps tbody tr").count() == 4  # input, agent, tools, review (interrupted)
    watched.shot("06-thread")
    assert watched.dialogs == [] and watched.console == []


def test_store_content_runs_no_script(browser: Browser, readonly: Server) -> None:
    watched = open_page(browser, readonly)
    page = watched.page
    page.locator("#runs a.run-link", has_text="evil").click()
    page.locator("a.cp-link").first.click()
    assert "<img src=x onerror" in page.locator("#metadata").inner_text()  # shown as text
    assert "javascript:alert(3)" in page.locator("#state").inner_text()
    page.goto(readonly.base + "/")
    page.locator("#runs a.thread-link", has_text="<script>").click()
    assert XSS_THREAD in page.locator("h1").inner_text()
    watched.shot("07-hostile")
    page.wait_for_timeout(300)  # let any handler that slipped through fire
    assert watched.dialogs == [] and watched.console == []


def test_missing_or_wrong_token_is_refused(browser: Browser, readonly: Server) -> None:
    page = browser.new_context().new_page()
    assert page.goto(readonly.base + "/").status == 403  # type: ignore[union-attr]
    assert page.goto(readonly.base + "/?token=not-the-token").status == 403  # type: ignore[union-attr]
    assert page.goto(readonly.base + "/run?name=research").status == 403  # type: ignore[union-attr]
    assert page.goto(readonly.url).status == 200  # type: ignore[union-attr]


def test_a_commit_by_another_process_appears_within_2_seconds(browser: Browser, readonly: Server, demo: Demo) -> None:
    watched = open_page(browser, readonly)
    page = watched.page
    page.goto(readonly.base + "/run?name=research-fork")
    page.wait_for_timeout(500)  # the page's event stream is connected
    code = "import agentfs, sys; print(agentfs.open(sys.argv[1]).run('research-fork').commit({'step': 10}).id)"
    committed = subprocess.run([sys.executable, "-c", code, str(demo[0])], capture_output=True, text=True, check=True)
    returned = time.monotonic()
    page.wait_for_selector(f"tr[data-id='{committed.stdout.strip()}']", timeout=LIVE_WITHIN * 1000 + 1000)
    took = time.monotonic() - returned
    assert took <= LIVE_WITHIN, took
    watched.shot("08-live")


def test_writes_refused_without_allow_writes(browser: Browser, readonly: Server, demo: Demo) -> None:
    watched = open_page(browser, readonly)
    page = watched.page
    head = ids_head(demo[0], "research-fork")
    page.goto(f"{readonly.base}/checkpoint?run=research-fork&id={head}")
    assert page.locator("form.act, button#edit-button, button#fork-button, button#note-button").count() == 0
    page.goto(f"{readonly.base}/journal?run=research")
    assert page.locator("form.abandon").count() == 0
    for action in ("edit", "fork", "abandon", "note"):
        response = page.request.post(f"{readonly.base}/act/{action}", form={"run": "research-fork", "id": head, "state": "{}"},
                                     headers={"origin": readonly.base})  # fmt: skip
        assert response.status == 404, action
    assert ids_head(demo[0], "research-fork") == head


def ids_head(store: Path, run: str) -> str:
    with agentfs.open(store) as opened:
        head = opened.run(run).head_id()
    assert head is not None
    return head


def test_with_allow_writes_an_edit_commits_with_parent_and_a_moved_head_is_a_conflict(browser: Browser, tmp_path: Path) -> None:
    build_demo(tmp_path)
    server = start(tmp_path / "store", "--allow-writes")
    try:
        watched = open_page(browser, server)
        page = watched.page
        head = ids_head(tmp_path / "store", "research-fork")
        page.goto(f"{server.base}/checkpoint?run=research-fork&id={head}")
        page.locator("#edit-form textarea").fill('{"step": 100, "edited": true}')
        page.locator("#edit-button").click()
        assert f"on top of {head}" in page.locator("#message").inner_text()
        with agentfs.open(tmp_path / "store") as store:
            edited = store.run("research-fork").latest()
            assert edited is not None and edited.parent == head and edited.state == {"step": 100, "edited": True}
            assert edited.metadata["agentfs_ui"] == {"action": "edit", "user": "alice", "from": head}
        watched.shot("09-edited")
        page.goto(f"{server.base}/checkpoint?run=research-fork&id={edited.id}")  # read, then another process moves the head
        with agentfs.open(tmp_path / "store") as store:
            moved = store.run("research-fork").commit({"step": 101}).id
        page.locator("#edit-form textarea").fill('{"step": 102}')
        page.locator("#edit-button").click()
        message = page.locator("#message").inner_text()
        assert "conflict, nothing committed" in message and moved in message
        assert ids_head(tmp_path / "store", "research-fork") == moved
        watched.shot("10-conflict")
        page.goto(f"{server.base}/journal?run=research")
        page.locator("form.abandon input[name=reason]").fill("the worker died")
        page.locator("form.abandon button").click()
        assert page.locator("tr.call.in_flight").count() == 0 and page.locator("tr.call.error", has_text="write_report").count() == 1
        page.goto(f"{server.base}/run?name=research-fork")
        audit = page.locator("#audit").inner_text()
        assert "alice" in audit and "edit" in audit
        page.goto(f"{server.base}/run?name=research")
        assert "abandoned call 'write-1': the worker died" in page.locator("#audit").inner_text()
        watched.shot("11-audit")
        assert watched.dialogs == [] and watched.console == []
    finally:
        server.process.terminate()
        server.process.wait(10)
