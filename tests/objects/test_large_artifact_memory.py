"""Memory: a 1 GB artifact commits and reads back in bounded memory.

A separate process (tests/helpers/memory_probe.py) commits the file by path and from an open
binary file, streams it back with Artifact.open() and Artifact.save(), and reports the increase of
its peak RSS (ru_maxrss, and VmHWM) over a baseline taken after imports, before the first commit.
The probe relaunches itself from a small process: on Linux a child's ru_maxrss starts at its
parent's RSS, which from pytest would hide growth below pytest's own size.
"""

from __future__ import annotations

import hashlib
import json
import random
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np

from tests.helpers import raw

HELPERS = Path(__file__).parents[1] / "helpers"
MB = 1 << 20
SIZE = 1024 * MB
PIECE = 8 * MB
LIMIT = 200 * MB


def _write_big_file(path: Path) -> str:
    """1 GB written 8 MB at a time, half random bytes, half text (compressible, partly repetitive)."""
    rng = random.Random(8)
    noise = np.random.default_rng(8)
    words = ["".join(rng.choice("etaoinshrdlu") for _ in range(rng.randint(2, 9))) for _ in range(1000)]
    text = " ".join(rng.choice(words) for _ in range(200_000)).encode()[:MB]
    digest = hashlib.sha256()
    with open(path, "wb") as handle:
        for i in range(SIZE // PIECE):
            if i % 2:
                piece = noise.bytes(PIECE)
            else:
                offset = rng.randrange(MB)
                rotated = text[offset:] + text[:offset]
                piece = (f"piece {i}\n".encode() + rotated * (PIECE // MB))[:PIECE]
            handle.write(piece)
            digest.update(piece)
    return digest.hexdigest()


def test_1gb_artifact_commits_and_reads_back_in_bounded_memory(tmp_path: Path) -> None:
    source = tmp_path / "big.bin"
    root = tmp_path / ".agentfs"
    try:
        _commit_and_read_back(source, root, tmp_path)
    finally:  # 2 GB of scratch: do not leave it for pytest's kept temp dirs
        source.unlink(missing_ok=True)
        shutil.rmtree(root, ignore_errors=True)


def _commit_and_read_back(source: Path, root: Path, scratch: Path) -> None:
    expected = _write_big_file(source)
    assert source.stat().st_size == SIZE
    # durability="process": memory does not depend on fsync, and 8,000 object fsyncs would double the runtime
    proc = subprocess.run(
        [sys.executable, str(HELPERS / "memory_probe.py"), str(root), str(source), str(scratch), "process"],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    print({k: (f"{v / MB:.1f} MB" if type(v) is int else v) for k, v in result.items()})

    assert result["size"] == SIZE and result["saved_size"] == SIZE
    assert result["open_sha256"] == expected, "Artifact.open() returned other bytes"
    assert result["save_sha256"] == expected, "Artifact.save() wrote other bytes"
    assert result["same_ref"], "the same bytes from a path and from a file object stored differently"
    # the baseline is the probe's own (not inherited from pytest), and 256 MB held at the end shows up
    assert result["baseline"] < 150 * MB
    assert result["calibration"] > 240 * MB and result["calibration_hwm"] > 240 * MB
    for phase in ("commit_path", "commit_file", "open", "save"):
        for measure in (phase, f"{phase}_hwm"):
            grown = result[measure]
            assert grown < LIMIT, f"peak RSS grew by {grown / MB:.0f} MB by the end of {phase} (limit 200 MB)"

    stored = raw.stored_object_size(root)
    assert stored < SIZE  # the text half compresses; nothing was stored twice
    assert raw.temp_files(root) == [], "temp files left behind"
