"""`agentfs ui --remote URL`: a real server process browsing a file remote lazily and read-only."""

from __future__ import annotations

import os
import random
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest

import agentfs
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


def tree_bytes(root: Path) -> int:
    return sum(path.stat().st_size for path in root.rglob("*") if path.is_file())


def test_remote_pages_fetch_only_what_they_show(tmp_path: Path) -> None:
    """Item 9, "browses a bucket lazily, without cloning it": the runs list, a run and a checkpoint page of a remote
    holding 12 MiB of artifacts leave under a tenth of it (a chunk of preview) in the page's scratch store (a clone would copy it all).
    The scratch store is the temporary directory `agentfs ui --remote` opens, found through TMPDIR."""
    rng = random.Random(7)
    ids = []
    with agentfs.open(tmp_path / "store") as store:
        run = store.run("big")
        for step in range(4):
            ids.append(run.commit({"step": step}, artifacts={"data.bin": rng.randbytes(3 << 20)}).id)
    url = (tmp_path / "remote").as_uri()
    assert main(["--store", str(tmp_path / "store"), "sync", url]) == 0
    remote_bytes = tree_bytes(tmp_path / "remote")
    assert remote_bytes > 12 << 20
    scratch_root = tmp_path / "tmp"
    scratch_root.mkdir()
    process = subprocess.Popen(
        [*COMMAND, "ui", "--remote", url, "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "TMPDIR": str(scratch_root)},
    )
    try:
        assert process.stdout is not None
        base, token = process.stdout.readline().strip().split("/?token=")
        cookie = f"agentfs_ui_token={token}"
        for page in ("/", "/run?name=big", f"/checkpoint?run=big&id={ids[-1]}", f"/checkpoint?run=big&id={ids[0]}"):
            status, body = get(base + page, cookie)
            assert status == 200, (page, body[:300])
        assert "data.bin" in body
        fetched = tree_bytes(scratch_root)
    finally:
        process.terminate()
        process.wait(10)
    assert fetched < remote_bytes // 10, f"browsing 4 pages copied {fetched} of the remote's {remote_bytes} bytes"
