"""Check one crash state of a store through the public API, against the calls acknowledged before the cut.

Problems are one line each, prefixed: `lost:` an acknowledged call is missing or differs, `torn:` a
visible checkpoint or journal call cannot be read whole, `open:`, `verify:`, `commit:` the store
refuses to open, verifies unclean, or refuses a new commit.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import agentfs

from .workloads import digest, encryption

Location = tuple[str, str]  # (run, checkpoint id) or (run, journal key)


def expectations(acks: list[dict[str, Any]]) -> tuple[dict[Location, dict[str, Any]], dict[Location, str], set[Location]]:
    """(checkpoints that must be there, once results that must be recorded, checkpoints that must be gone)."""
    checkpoints: dict[Location, dict[str, Any]] = {}
    results: dict[Location, str] = {}
    gone: set[Location] = set()
    for record in acks:
        if record["call"] in ("commit", "fork"):
            checkpoints[(record["run"], record["id"])] = record
        elif record["call"] == "once":
            results[(record["run"], record["key"])] = record["result"]
        elif record["call"] == "prune":
            for removed in record["removed"]:
                checkpoints.pop((record["run"], removed), None)
                gone.add((record["run"], removed))
            for kept in record["kept"]:
                checkpoints.setdefault((record["run"], kept), {"call": "prune", "run": record["run"], "id": kept})
    return checkpoints, results, gone


def _read_whole(checkpoint: agentfs.Checkpoint) -> tuple[str, dict[str, str]]:
    artifacts = {name: hashlib.sha256(art.read_bytes()).hexdigest() for name, art in checkpoint.artifacts.items()}
    return digest(checkpoint.state), artifacts


def check(root: Path, acks: list[dict[str, Any]]) -> list[str]:
    try:
        store = agentfs.open(root, durability="process", encryption=encryption(root, ""))  # the check's own commit needs no sync
    except Exception as exc:  # any failure to open is the finding
        return [f"open: {type(exc).__name__}: {exc}"]
    with store:
        return _check_open(store, acks)


def _check_open(store: agentfs.Store, acks: list[dict[str, Any]]) -> list[str]:
    problems: list[str] = []
    checkpoints, results, gone = expectations(acks)
    runs = set(store.runs()) | {run for run, _ in checkpoints} | {run for run, _ in results}
    for run_name in sorted(runs):
        run = store.run(run_name)
        present = set(run.ids())
        for checkpoint_id in sorted(present):
            try:
                read = _read_whole(run.get(checkpoint_id))
            except Exception as exc:
                kind = "lost" if (run_name, checkpoint_id) in checkpoints else "torn"
                problems.append(f"{kind}: {run_name}@{checkpoint_id} is visible but unreadable: {type(exc).__name__}: {exc}")
                continue
            expected = checkpoints.get((run_name, checkpoint_id))
            if expected is not None and "state" in expected and read != (expected["state"], expected["artifacts"]):
                problems.append(f"lost: {expected['call']} {run_name}@{checkpoint_id} reads back different state or artifacts")
            if (run_name, checkpoint_id) in gone:
                problems.append(f"lost: prune of {run_name}@{checkpoint_id}: the removed checkpoint is back")
        for (expected_run, checkpoint_id), record in checkpoints.items():
            if expected_run == run_name and checkpoint_id not in present:
                problems.append(f"lost: {record['call']} {run_name}@{checkpoint_id} is missing")
        for recorded in run.journal.calls():
            if recorded.status == "ok":
                try:
                    recorded.result  # noqa: B018 - reading it is the check
                except Exception as exc:
                    problems.append(f"torn: once {run_name}/{recorded.key}: recorded result unreadable: {exc}")
    for (run_name, key), result in results.items():
        call = store.run(run_name).journal.get(key)
        if call is None or call.status != "ok":
            problems.append(f"lost: once {run_name}/{key} is {'missing' if call is None else call.status}")
        elif digest(call.result) != result:
            problems.append(f"lost: once {run_name}/{key} reads back a different result")
    report = store.verify()
    problems.extend(f"verify: {problem}" for problem in report.problems)
    for run_name in sorted(runs | {"crashsim/after"}):
        try:
            store.run(run_name).commit({"after": "the crash"}, artifacts={"after.txt": b"after"})
        except Exception as exc:
            problems.append(f"commit: to {run_name} after the crash failed: {type(exc).__name__}: {exc}")
    return problems
