"""Progress on a terminal counts bytes, says what a command waits for, and is off with --quiet or without a terminal."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import struct
import subprocess
import termios
from pathlib import Path

import agentfs
from tests.cli.test_cli import COMMAND, ENV
from tests.servers import make_file_spec

SIZE = 6_000_000


def on_terminal(*args: str) -> str:
    """Run `agentfs ARGS` with its stderr on a pseudo-terminal; what it wrote there."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 250, 0, 0))  # a pty starts 0 columns wide
    child = subprocess.Popen([*COMMAND, *args], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=follower, env=ENV)
    os.close(follower)
    written = b""
    while True:
        try:
            block = os.read(leader, 1 << 16)
        except OSError:  # EIO: the child closed the terminal
            break
        if not block:
            break
        written += block
    os.close(leader)
    assert child.wait(timeout=120) == 0, written
    return written.decode(errors="replace")


def test_push_pull_clone_verify_and_gc_show_bytes_and_what_they_wait_for(tmp_path: Path) -> None:
    spec = make_file_spec(tmp_path)
    options = json.dumps(spec.storage_options)
    source = tmp_path / "a"
    with agentfs.open(source) as store:
        store.run("main").commit({"step": 1}, artifacts={"data.bin": os.urandom(SIZE)})
    remote = ("--storage-options", options)

    pushed = on_terminal("--store", str(source), "sync", spec.url, *remote)
    assert f"push {spec.url}" in pushed and "MB/" in pushed and "checkpoint/s" not in pushed  # bytes, with their rate
    with agentfs.open(tmp_path / "b"):
        pass
    pulled = on_terminal("--store", str(tmp_path / "b"), "pull", spec.url, *remote)
    assert f"pull {spec.url}" in pulled and "MB" in pulled and "checkpoint/s" not in pulled
    cloned = on_terminal("clone", spec.url, *remote, str(tmp_path / "c"))
    assert f"pull {spec.url}" in cloned and "MB" in cloned
    verified = on_terminal("verify", "--remote", spec.url, *remote, "--deep")
    assert f"verify {spec.url}" in verified and "MB/" in verified
    collected = on_terminal("--store", str(source), "gc", "--remote", spec.url, *remote, "--settle", "3")
    assert "settle time" in collected  # what its wait is for

    quiet = on_terminal("--quiet", "--store", str(source), "verify", "--remote", spec.url, *remote, "--deep")
    assert "MB" not in quiet
    piped = subprocess.run([*COMMAND, "verify", "--remote", spec.url, *remote, "--deep"], capture_output=True, text=True, env=ENV)
    assert piped.returncode == 0 and piped.stderr == ""  # not a terminal: no bar


def test_a_local_verify_shows_the_bytes_it_rehashes_on_a_terminal_only(tmp_path: Path) -> None:
    store_path = tmp_path / "a"
    with agentfs.open(store_path) as store:
        store.run("main").commit({"step": 1}, artifacts={"data.bin": os.urandom(SIZE)})

    verified = on_terminal("--store", str(store_path), "verify")  # a local verify always re-hashes every object
    assert f"verify {store_path}" in verified and "MB" in verified and "100%" in verified, verified
    quiet = on_terminal("--quiet", "--store", str(store_path), "verify")
    assert "MB" not in quiet
    piped = subprocess.run([*COMMAND, "--store", str(store_path), "verify"], capture_output=True, text=True, env=ENV)
    assert piped.returncode == 0 and piped.stderr == ""  # not a terminal: no bar
