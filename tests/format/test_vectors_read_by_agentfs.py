"""The format-2 test vectors are what this agentfs reads, and their independent reader imports no agentfs.

tests/format/test_vectors_from_spec.py reads the vectors from docs/FORMAT.md alone; this module checks the other
side: agentfs opens a copy of the vector store, and a store reading the vector remote, and finds what
vectors.json describes. If agentfs stops reading the committed bytes, the format changed: the vectors
and the spec's Changes section must say so.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import msgpack
import pytest

import agentfs

# the same store and remote written with log entries of version 1, and of version 2 (test_vectors_from_spec.py)
VECTOR_SETS = [Path(__file__).parents[1] / "vectors" / name for name in ("format2", "format2-entries2")]


def _described(value: Any, stored: dict[str, Any]) -> dict[str, Any]:
    """`value` (as agentfs loads it) in the form vectors.json gives for a value stored as `stored` says."""
    if "ext" in stored:
        assert isinstance(value, tuple), f"{value!r} should load as a tuple (ext 1)"
        return {"format": 0, "ext": 1, "items": list(value)}
    if "sha256" in stored:
        body = b"".join(msgpack.packb(item) for item in value)
        return {"format": 1, "count": len(value), "sha256": hashlib.sha256(body).hexdigest(), "size": len(body), "first": value[0]}
    return {"format": stored["format"], "value": value}


def _check_store(store: agentfs.Store, expected: dict[str, Any]) -> None:
    assert sorted(store.runs()) == sorted(expected["runs"])
    for name, run_described in expected["runs"].items():
        run = store.run(name)
        assert run.ids() == run_described["ids"]
        assert run.head_id() == run_described["head"]
        for checkpoint_id, described in run_described["checkpoints"].items():
            checkpoint = run.get(checkpoint_id)
            assert checkpoint.parent == described["parent"]
            assert (list(checkpoint.forked_from) if checkpoint.forked_from else None) == described["forked_from"]
            assert checkpoint.metadata == described["metadata"]
            state = checkpoint.state
            assert {key: _described(state[key], stored) for key, stored in described["state"].items()} == described["state"]
            assert set(state) == set(described["state"])
            artifacts = {n: a.read_bytes() for n, a in checkpoint.artifacts.items()}
            assert {n: {"sha256": hashlib.sha256(data).hexdigest(), "size": len(data)} for n, data in artifacts.items()} == described[
                "artifacts"
            ]


@pytest.mark.parametrize("vectors", VECTOR_SETS, ids=lambda path: path.name)
def test_agentfs_reads_the_vector_store(tmp_path: Path, vectors: Path) -> None:
    expected = json.loads((vectors / "vectors.json").read_text())
    shutil.copytree(vectors / "store", tmp_path / "store")
    with agentfs.open(tmp_path / "store") as store:
        assert store.id == expected["store_id"]
        _check_store(store, expected)
        for name, run_described in expected["runs"].items():
            calls = [{"key": c.key, "status": c.status, "result": c.result} for c in store.run(name).journal.calls()]
            assert calls == run_described["journal"]
        for name, ids in expected["retired"].items():  # hidden by their retirement record, though still in a segment
            for checkpoint_id in ids:
                with pytest.raises(agentfs.NotFound):
                    store.run(name).get(checkpoint_id)
        assert store.verify().ok


@pytest.mark.parametrize("vectors", VECTOR_SETS, ids=lambda path: path.name)
def test_agentfs_reads_the_vector_remote(tmp_path: Path, vectors: Path) -> None:
    expected = json.loads((vectors / "vectors.json").read_text())
    shutil.copytree(vectors / "remote", tmp_path / "remote")
    with agentfs.open(tmp_path / "reader", remote=str(tmp_path / "remote")) as store:
        for name, run_described in expected["runs"].items():
            latest = store.run(name).latest()
            assert latest is not None and latest.id == run_described["head"]
            described = run_described["checkpoints"][latest.id]
            state = latest.state
            assert {key: _described(state[key], stored) for key, stored in described["state"].items()} == described["state"]


def test_the_independent_reader_imports_nothing_from_agentfs() -> None:
    """Run test_format_vectors's tests in a process where `import agentfs` fails."""
    script = textwrap.dedent(
        f"""
        import importlib.util, sys
        sys.modules["agentfs"] = None  # any import of agentfs or a submodule now raises ImportError
        spec = importlib.util.spec_from_file_location("reader", {str(Path(__file__).parent / "test_vectors_from_spec.py")!r})
        module = sys.modules["reader"] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        tests = [name for name in dir(module) if name.startswith("test_")]
        for name in tests:
            getattr(module, name)()
        print(len(tests))
        """
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert int(done.stdout) >= 4, "the reader's tests ran"
