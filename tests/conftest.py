from __future__ import annotations

from pathlib import Path

import pytest

import agentfs


@pytest.fixture
def store(tmp_path: Path) -> agentfs.Store:
    with agentfs.open(tmp_path / ".agentfs") as opened:
        yield opened
