"""Push, pull, clone and `verify --remote --deep` of a big artifact keep peak RSS under 200 MB, whatever its size.

Each command runs as a real `agentfs` process, its peak RSS read by a small parent
(tests/helpers/peak_rss.py). The artifact is incompressible (os.urandom). Sizes: the file remote at
MEMORY_FILE_BYTES (default 1 GiB), moto S3 at MEMORY_S3_BYTES (default 64 MiB in `make test`: moto,
serving from this process, took 2.5 minutes for 256 MiB on a busy 2-core machine; the full 1 GiB is
`AGENTFS_MEMORY_S3_BYTES=1073741824`, `make test-push-stress`).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import agentfs
from tests.cli.test_cli import COMMAND
from tests.servers import MotoServer, RemoteSpec, make_file_spec, make_s3_spec
from tests.sync.test_push_resume import child_env, write_random

HELPERS = Path(__file__).parents[1] / "helpers"
BOUND = 200_000_000  # bytes of peak RSS, the bound docs/sync.md states ("Memory is bounded")
MEMORY_FILE_BYTES = int(os.environ.get("AGENTFS_MEMORY_FILE_BYTES", str(1 << 30)))
MEMORY_S3_BYTES = int(os.environ.get("AGENTFS_MEMORY_S3_BYTES", str(64 << 20)))
BLOCK = 1 << 20


def peak_rss(*args: str) -> int:
    """Run `agentfs ARGS` in a child process; its peak RSS in bytes (it must succeed)."""
    probe = subprocess.run(
        [sys.executable, str(HELPERS / "peak_rss.py"), *COMMAND, *args],
        env=child_env(),
        capture_output=True,
        text=True,
        timeout=1800,
        check=True,
    )
    result = json.loads(probe.stdout)
    assert result["returncode"] == 0, result["stderr"]
    return int(result["peak_rss"])


def store_with_artifact(directory: Path, size: int) -> str:
    """A store at `directory` whose run "big" holds one artifact of `size` random bytes; its sha256."""
    artifact = directory.parent / f"{directory.name}.bin"
    sha = write_random(artifact, size)
    with agentfs.open(directory) as store:
        store.run("big").commit({"size": size}, artifacts={"data.bin": artifact})
    artifact.unlink()
    return sha


def artifact_sha(directory: Path) -> str:
    digest = hashlib.sha256()
    with agentfs.open(directory) as store, store.run("big").latest().artifacts["data.bin"].open() as stream:
        while block := stream.read(BLOCK):
            digest.update(block)
    return digest.hexdigest()


@pytest.fixture(scope="module")
def big_store(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, int, str]]:
    size = max(MEMORY_FILE_BYTES, MEMORY_S3_BYTES)
    root = tmp_path_factory.mktemp("memory") / "source"
    yield root, size, store_with_artifact(root, size)


def check_bounded(source: Path, spec: RemoteSpec, tmp_path: Path, sha: str) -> dict[str, int]:
    options = json.dumps(spec.storage_options)
    peaks = {"push": peak_rss("--store", str(source), "sync", spec.url, "--storage-options", options)}
    pulled = tmp_path / "pulled"
    with agentfs.open(pulled):
        pass
    peaks["pull"] = peak_rss("--store", str(pulled), "pull", spec.url, "--storage-options", options)
    assert artifact_sha(pulled) == sha
    peaks["clone"] = peak_rss("clone", spec.url, "--storage-options", options, str(tmp_path / "cloned"))
    assert artifact_sha(tmp_path / "cloned") == sha
    peaks["verify --remote --deep"] = peak_rss("verify", "--remote", spec.url, "--storage-options", options, "--deep")
    print(f"peak RSS, {spec.kind} remote: " + ", ".join(f"{name} {peak / 1e6:.0f} MB" for name, peak in peaks.items()))
    over = {name: peak for name, peak in peaks.items() if peak >= BOUND}
    assert not over, f"peak RSS over {BOUND} bytes: {over}"
    return peaks


def test_file_remote_push_pull_clone_and_deep_verify_stay_under_the_bound(big_store: tuple[Path, int, str], tmp_path: Path) -> None:
    source, size, sha = big_store
    assert size >= MEMORY_FILE_BYTES
    check_bounded(source, make_file_spec(tmp_path), tmp_path, sha)


def test_s3_push_pull_clone_and_deep_verify_stay_under_the_bound(tmp_path: Path, moto_server: MotoServer) -> None:
    source = tmp_path / "source"
    sha = store_with_artifact(source, MEMORY_S3_BYTES)
    check_bounded(source, make_s3_spec(moto_server), tmp_path, sha)
