"""The committed format-1 test store (tests/data/format1-store.tar.gz) and what an upgrade of it must keep.

The expected records are read from the extracted files with the plainest rules of docs/FORMAT.md
(format 1 layout), independently of agentfs/engine/upgrade.py, and compared with raw segment reads.
"""

from __future__ import annotations

import hashlib
import json
import tarfile
from pathlib import Path
from typing import Any

import agentfs
from agentfs.engine.segments import SegmentReader
from agentfs.format import kinds

DATA = Path(__file__).resolve().parents[1] / "data"
ARCHIVE = DATA / "format1-store.tar.gz"
DESCRIBED = DATA / "format1-store.json"
FORMAT1_TREES = ("objects", "runs", "forks")
RUN_KINDS = {"log": kinds.ENTRY, "journal": kinds.JOURNAL, "retired": kinds.RETIRED}

Records = dict[tuple[int, bytes], bytes]


def extract(directory: Path) -> Path:
    """A fresh copy of the format-1 store under `directory`; its root."""
    with tarfile.open(ARCHIVE) as archive:
        archive.extractall(directory, filter="data")
    return directory / "format1-store"


def described() -> dict[str, Any]:
    return json.loads(DESCRIBED.read_text())


def format1_files(root: Path) -> dict[str, bytes]:
    """Every file under objects/, runs/ and forks/, by path: what a format-1 reader reads."""
    return {
        path.relative_to(root).as_posix(): path.read_bytes()
        for tree in FORMAT1_TREES
        for path in sorted((root / tree).rglob("*"))
        if path.is_file()
    }


def expected_records(root: Path) -> Records:
    """(kind, key) -> body of every record the format-1 files at `root` hold."""
    runs = root / "runs"
    records: Records = {}
    for path in (root / "objects").glob("*/*"):
        records[(kinds.OBJECT, bytes.fromhex(path.parent.name + path.name))] = path.read_bytes()
    names = set()
    for path in runs.rglob("*"):
        if path.is_file() and path.parent.name in RUN_KINDS:
            run = path.parent.parent.relative_to(runs).as_posix()
            names.add(run)
            records[(RUN_KINDS[path.parent.name], kinds.pair_key(run, path.name))] = path.read_bytes()
        elif path.is_dir() and path.name not in RUN_KINDS:
            names.add(path.relative_to(runs).as_posix())
    by_digest = {hashlib.sha256(name.encode()).hexdigest(): name for name in names}
    for path in (root / "forks").glob("*/*"):
        records[(kinds.FORK, kinds.pair_key(by_digest[path.parent.name], path.read_text()))] = b""
    return records


def segment_records(root: Path) -> tuple[Records, list[str]]:
    """(kind, key) -> body of every record in root/segments (raw reads), and the reader's problems."""
    reader = SegmentReader(root / "segments")
    records: Records = {}
    problems = []
    for kind, key, location in list(reader.records()):
        record = reader.read(location)
        if records.setdefault((kind, key), record.body) != record.body:
            problems.append(f"two copies of {kinds.NAMES[kind]} {key!r} differ")
    return records, reader.problems + problems


def missing(expected: Records, found: Records) -> list[str]:
    """One line per expected record that `found` lacks or holds with other bytes."""
    return [
        f"{kinds.NAMES[kind]} {key!r} is {'missing' if (kind, key) not in found else 'different'}"
        for (kind, key), body in sorted(expected.items())
        if found.get((kind, key)) != body
    ]


def compare_with_json(store: agentfs.Store, expected: dict[str, Any]) -> list[str]:
    """What `store` shows differently from the JSON the format-1 store was described by (one line each)."""
    problems = []
    for name, run_expected in expected["runs"].items():
        run = store.run(name)
        if run.ids() != run_expected["ids"] or run.head_id() != run_expected["head"]:
            problems.append(f"{name}: ids {run.ids()} head {run.head_id()}")
        for checkpoint_id, checkpoint_expected in run_expected["checkpoints"].items():
            checkpoint = run.get(checkpoint_id)
            artifacts = {n: hashlib.sha256(a.read_bytes()).hexdigest() for n, a in checkpoint.artifacts.items()}
            read = {
                "state": checkpoint.state,
                "metadata": checkpoint.metadata,
                "parent": checkpoint.parent,
                "forked_from": list(checkpoint.forked_from) if checkpoint.forked_from else None,
                "artifacts": artifacts,
            }
            if read != checkpoint_expected:
                problems.append(f"{name}@{checkpoint_id} reads {read}")
        calls = {c.key: {"status": c.status, "result": c.result if c.status == "ok" else None} for c in run.journal.calls()}
        if calls != run_expected["journal"]:
            problems.append(f"{name}: journal {calls}")
    for name, retired in expected["retired"].items():
        back = set(retired) & set(store.run(name).ids())
        if back:
            problems.append(f"{name}: retired checkpoints {sorted(back)} are back")
    return problems
