"""`agentfs ui --remote URL`: a real server process browsing a file remote lazily and read-only."""

from __future__ import annotations

import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from agentfs.cli.main import main
from tests.ui_fixtures import build_demo

COMMAND = [sys.executable, "-m", "agentfs.cli.main"]


def get(url: str, cookie: str | None = None) -> tuple[int, str]:
    request = urllib.request.Request(url, headers={"cookie": cookie} if cookie else {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_remote_is_browsed_read_only(tmp_path: Path) -> None:
    ids = build_demo(tmp_path)
    url = (tmp_path / "remote").as_uri()
    assert main(["--store", str(tmp_path / "store"), "sync", url]) == 0
    process = subprocess.Popen(
        [*COMMAND, "ui", "--remote", url, "--port", "0"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
    )
    try:
        assert process.stdout is not None
        launch = process.stdout.readline().strip()
        base, token = launch.split("/?token=")
        cookie = f"agentfs_ui_token={token}"
        assert get(base + "/")[0] == 403
        status, runs = get(base + "/", cookie)
        assert status == 200 and 'href="/run?name=research"' in runs and 'href="/run?name=research-fork"' in runs
        status, run = get(base + "/run?name=research", cookie)
        assert status == 200 and "diverged: 2 heads" in run and "data-live" not in run  # no live updates from a remote
        status, checkpoint = get(f"{base}/checkpoint?run=research&id={ids['second']}", cookie)
        assert status == 200 and 'data-name="report.md"' in checkpoint and "/act/" not in checkpoint
        assert get(base + "/events", cookie)[0] == 404
    finally:
        process.terminate()
        process.wait(10)


def test_remote_with_allow_writes_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ui", "--remote", (tmp_path / "r").as_uri(), "--allow-writes"]) == 2
    assert "read-only" in capsys.readouterr().err
