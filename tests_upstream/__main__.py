"""`python -m tests_upstream [pytest args]`: LangGraph's own checkpointer tests on AgentFSSaver, compared with the stock savers.

Fetches the installed langgraph's sdist from the package index (once; its tests/ are kept in
.cache/langgraph-upstream/<version>/, never in git), runs every test that uses the suite's
`sync_checkpointer` or `async_checkpointer` fixture with the stock savers and with AgentFSSaver
(plain and AES-encrypted), prints counts per saver and the skips with their reasons, and exits 1 if
any test that passed with both stock savers (in-memory and SQLite) did not pass with an agentfs
variant. Extra arguments go to pytest (e.g. `-k fork`, a test file).

A few of the suite's tests time their own steps (`test_stream_buffering_single_node` expects its first
event within 0.1 s); on a loaded machine one can miss its window by chance (CI, 2026-11-24: a 0.2 s stall
before the first event with agentfs_aes, 5 ms here in 3 runs of the same graph). So a test that failed
with an agentfs variant, where both stock savers pass, runs once more in a fresh pytest; if it passes
then it is reported as flaky, loudly, and not counted. A test that fails again is a regression.

Postgres and Redis variants are left out (NO_DOCKER=true, the suite's own switch): the suite
expects those servers already running in docker.
"""

from __future__ import annotations

import collections
import dataclasses
import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path
from typing import Any

from tests_upstream.plugin import SAVERS

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / ".cache" / "langgraph-upstream"
STOCK = {"sync_checkpointer": ("memory", "sqlite"), "async_checkpointer": ("memory", "sqlite_aio")}
TEST_TIMEOUT = 120  # seconds a test may take before pytest-timeout fails it
MAX_RERUNS = 5  # more failures than this are not chance: no rerun


def suite(version: str) -> Path:
    """The directory holding the sdist's tests/ for `version`, fetched on first use."""
    target = CACHE / version
    if (target / "tests" / "conftest.py").is_file():
        return target
    CACHE.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=CACHE) as scratch:
        command = [sys.executable, "-m", "pip", "download", "--quiet", "--no-binary", ":all:", "--no-deps", f"langgraph=={version}"]
        subprocess.run([*command, "-d", scratch], check=True)
        (sdist,) = Path(scratch).glob("langgraph-*.tar.gz")
        unpacked = Path(scratch) / "unpacked"
        with tarfile.open(sdist) as archive:
            prefix = f"langgraph-{version}/tests/"
            members = [member for member in archive.getmembers() if member.name.startswith(prefix)]
            for member in members:
                member.name = member.name[len(f"langgraph-{version}/") :]
            archive.extractall(unpacked, members=members, filter="data")
        if not (unpacked / "tests" / "conftest.py").is_file():
            raise SystemExit(f"{sdist.name}: no tests/conftest.py in the sdist; this harness cannot run it")
        # only tests/: the sdist's langgraph/ must not shadow the installed one; pytest.ini keeps our pyproject's settings out
        (unpacked / "pytest.ini").write_text("[pytest]\n")
        shutil.rmtree(target, ignore_errors=True)
        unpacked.rename(target)
    return target


def run(directory: Path, outcomes: Path, extra: list[str], targets: list[str] | None = None) -> int:
    """pytest on the suite's `targets` (all of tests/ by default) with the plugin; its exit code."""
    env = {**os.environ, "NO_DOCKER": "true", "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    command = [
        sys.executable, "-m", "pytest", *(targets or ["tests"]), "-q", "-p", "no:cacheprovider", "-p", "tests_upstream.plugin",
        "--agentfs-outcomes", str(outcomes), "--timeout", str(TEST_TIMEOUT), "--snapshot-warn-unused", "--rootdir", str(directory),
        *extra,
    ]  # fmt: skip
    return subprocess.run(command, cwd=directory, env=env, check=False).returncode


@dataclasses.dataclass
class Comparison:
    counts: dict[str, collections.Counter[str]]  # checkpointer -> outcome -> tests
    skips: collections.Counter[tuple[str, str]]  # (checkpointer, reason) -> tests
    regressions: list[str]  # agentfs variants that did not pass a test both stock savers pass
    failed: list[str]  # the node ids of those regressions that failed (not skipped): rerun candidates
    also_stock: list[str]  # agentfs variants that failed a test a stock saver did not pass either


def compare(tests: dict[str, dict[str, Any]]) -> Comparison:
    """`tests` as the plugin writes them: nodeid -> {variant_of, saver, outcome, reason}."""
    variants: dict[str, dict[str, dict[str, Any]]] = collections.defaultdict(dict)
    for nodeid, test in tests.items():
        variants[test["variant_of"]][test["saver"]] = {**test, "nodeid": nodeid}
    result = Comparison(collections.defaultdict(collections.Counter), collections.Counter(), [], [], [])
    for by_saver in variants.values():
        for saver, test in by_saver.items():
            result.counts[saver][test["outcome"]] += 1
            if test["outcome"] == "skipped":
                result.skips[(saver, test["reason"])] += 1
        baseline = any(all(by_saver.get(name, {}).get("outcome") == "passed" for name in stock) for stock in STOCK.values())
        for saver in SAVERS:
            ours = by_saver.get(saver)
            if ours is None or ours["outcome"] == "passed":
                continue
            if baseline:
                result.regressions.append(f"{ours['nodeid']}: {ours['outcome']} {ours['reason']}")
                if ours["outcome"] == "failed":
                    result.failed.append(ours["nodeid"])
            elif ours["outcome"] == "failed":
                result.also_stock.append(f"{ours['nodeid']}: failed, and a stock saver did not pass it either")
    return result


def settle(directory: Path, result: Comparison, extra: list[str]) -> list[str]:
    """Rerun, once and together in a fresh pytest, the regressions that failed; drop those that pass now
    from `result.regressions` and return them (flaky). A skip is no chance: never rerun."""
    if not result.failed or len(result.failed) > MAX_RERUNS:
        return []
    with tempfile.TemporaryDirectory() as scratch:
        outcomes = Path(scratch) / "rerun.json"
        run(directory, outcomes, extra, targets=result.failed)
        tests = json.loads(outcomes.read_text()) if outcomes.is_file() else {}
    flaky = [nodeid for nodeid in result.failed if tests.get(nodeid, {}).get("outcome") == "passed"]
    result.regressions = [line for line in result.regressions if line.split(": ", 1)[0] not in flaky]
    return flaky


def report(result: Comparison) -> None:
    print("\nLangGraph's checkpointer tests, per checkpointer:")
    for saver, counted in sorted(result.counts.items()):
        print(f"  {saver:<12} " + "  ".join(f"{outcome} {count}" for outcome, count in sorted(counted.items())))
    if result.skips:
        print("skipped (checkpointer, reason):")
        for (saver, reason), count in sorted(result.skips.items()):
            print(f"  {count:>4} {saver}: {reason}")
    for line in result.also_stock:
        print("  " + line)


def main(extra: list[str]) -> int:
    version = importlib.metadata.version("langgraph")
    directory = suite(version)
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as scratch:
        outcomes = Path(scratch) / "outcomes.json"
        code = run(directory, outcomes, extra)
        if code not in (0, 1) or not outcomes.is_file():  # 1: some test failed, which the comparison judges
            print(f"langgraph {version} tests: pytest exited {code} (interrupted, a collection or usage error)", file=sys.stderr)
            return 2
        tests = json.loads(outcomes.read_text())
    if not any(test["saver"] in SAVERS for test in tests.values()):
        print(f"langgraph {version} tests: no test ran with AgentFSSaver (the plugin did not extend the fixtures)", file=sys.stderr)
        return 2
    result = compare(tests)
    flaky = settle(directory, result, extra)
    report(result)
    for nodeid in flaky:
        print(f"FLAKY: {nodeid} failed with AgentFSSaver, then passed when run again (not counted)")
    regressions = result.regressions
    print(f"langgraph {version}: {len(tests)} checkpointer tests in {time.monotonic() - started:.0f} s")
    print("left out: the suite's postgres and redis variants (NO_DOCKER=true: they need servers the suite starts in docker)")
    if regressions:
        print(f"{len(regressions)} tests pass with both stock savers and not with AgentFSSaver:", file=sys.stderr)
        for line in regressions:
            print("  " + line, file=sys.stderr)
        return 1
    print("AgentFSSaver passes every test that both stock savers pass")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
