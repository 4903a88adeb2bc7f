"""Check one crash state of `agentfs upgrade` (the `upgrade` workload of workloads.py).

Every state must be a usable store with nothing lost: format 1 with its format-1 files exactly as
committed in tests/data (the upgrade only reads them), or format 2 with every format-1 record in its
segments byte for byte; once acknowledged, format 2. Then the documented recovery, `upgrade` run
again, must finish the job: a complete format-2 store with no format-1 name left. With the format-2
engine merged, the recovered store must also open and show what tests/data/format1-store.json says.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import agentfs
from agentfs.engine.upgrade import read_format, upgrade
from agentfs.format.config import FORMAT as ENGINE_FORMAT

from ..helpers.format1_store import compare_with_json, described, expected_records, extract, format1_files, missing, segment_records

FORMAT1_NAMES = ("objects", "runs", "forks", "locks/runs", "locks/pruned", "remotes")


def _original() -> tuple[dict[tuple[int, bytes], bytes], dict[str, bytes]]:
    with tempfile.TemporaryDirectory() as directory:
        root = extract(Path(directory))
        return expected_records(root), format1_files(root)


EXPECTED, ORIGINAL_FILES = _original()


def _format2_problems(root: Path) -> list[str]:
    found, problems = segment_records(root)
    return [f"segments: {problem}" for problem in problems] + [f"lost: {line}" for line in missing(EXPECTED, found)]


def check_upgrade(root: Path, acks: list[dict[str, Any]]) -> list[str]:
    try:
        found = read_format(root)[0]
    except Exception as exc:  # any failure to read the config is the finding
        return [f"open: {type(exc).__name__}: {exc}"]
    if found == 1:
        if acks:
            return ["lost: the upgrade was acknowledged, the store is format 1"]
        if format1_files(root) != ORIGINAL_FILES:
            return ["lost: the format-1 files changed before the commit point"]
    else:
        problems = _format2_problems(root)
        if problems:
            return problems
    try:
        upgrade(root)
    except Exception as exc:
        return [f"rerun: {type(exc).__name__}: {exc}"]
    problems = _format2_problems(root) + [f"rerun: {name} is left" for name in FORMAT1_NAMES if (root / name).exists()]
    if not problems and ENGINE_FORMAT >= 2:
        with agentfs.open(root, durability="process") as store:
            problems = [f"lost: {line}" for line in compare_with_json(store, described())]
    return problems
