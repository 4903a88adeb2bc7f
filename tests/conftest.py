from __future__ import annotations

from pathlib import Path

import pytest

import agentfs
from tests.helpers.tools import needs_tool

# The S3/GCS server fixtures and the hostile remote, for every test module (declared once, here).
pytest_plugins = ["tests.servers", "tests.helpers.hostile"]


@pytest.fixture
def strace_installed() -> None:
    """For tests that record system calls with strace (the crash-state harness, syscall counts)."""
    needs_tool("strace", "it records the test's system calls")


@pytest.fixture
def store(tmp_path: Path) -> agentfs.Store:
    with agentfs.open(tmp_path / ".agentfs") as opened:
        yield opened
