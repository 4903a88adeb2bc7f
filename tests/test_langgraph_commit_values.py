"""AgentFSSaver's cache of small decoded state values: read once per commit, large values never kept."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("langgraph.checkpoint.base")

import agentfs
from agentfs.core.checkpoint import Checkpoint
from agentfs.integrations.langgraph import records


def test_small_values_are_decoded_once_and_large_ones_each_time(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = agentfs.open(tmp_path / "s", durability="process")
    big = bytes(range(256)) * 4096  # 1 MiB: chunked into a tree, not packed into the entry
    commit = store.run("r").commit({"small": ["msgpack", b"x" * 100], "tiny": 1, "big": big})
    decoded: list[str] = []
    real = Checkpoint.value
    monkeypatch.setattr(Checkpoint, "value", lambda self, key: decoded.append(key) or real(self, key))
    read = records.CommitValues()
    for _ in range(3):
        again = store.run("r").get(commit.id)  # a new object for the same commit, as each saver read makes
        assert read(again, "small") == ["msgpack", b"x" * 100] and read(again, "tiny") == 1 and read(again, "big") == big
    assert sorted(decoded) == ["big", "big", "big", "small", "tiny"]
