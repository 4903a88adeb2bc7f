from __future__ import annotations

import signal
from pathlib import Path

import pytest

import agentfs
from tests.helpers.tools import needs_tool

# The S3/GCS server fixtures and the hostile remote, for every test module (declared once, here).
pytest_plugins = ["tests.servers", "tests.helpers.hostile"]

# Hazard: a suite started in the background of a non-interactive shell (`make test &`, nohup, some CI runners)
# inherits SIGINT ignored, and an ignored signal stays ignored across exec: every agentfs process a test starts
# then ignored the Ctrl-C the test sends it, and the Ctrl-C tests failed (tests/cli/test_cli.py, tests/cli/test_first_use.py; seen in
# a rehearsal of .ci/run started with `&`). A handler of ours is reset to the default at exec, so children get
# a terminal user's SIGINT whatever the runner did.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.fixture
def strace_installed() -> None:
    """For tests that record system calls with strace (the crash-state harness, syscall counts)."""
    needs_tool("strace", "it records the test's system calls")


@pytest.fixture
def store(tmp_path: Path) -> agentfs.Store:
    with agentfs.open(tmp_path / ".agentfs") as opened:
        yield opened
