"""System tools some tests need (strace, ...): skipped where missing, failed under CI."""

from __future__ import annotations

import os
import shutil

import pytest


def needs_tool(name: str, why: str) -> None:
    """Skip (saying why) where the system tool `name` is missing; fail instead under CI (env CI set), where
    `make test` installs it, so a test behind a durability claim never passes by not running."""
    if shutil.which(name) is not None:
        return
    if os.environ.get("CI"):
        pytest.fail(f"{name} is not installed, and CI must run this test: {why}")
    pytest.skip(f"needs {name}: {why}")
