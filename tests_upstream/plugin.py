"""A pytest plugin for LangGraph's test suite: AgentFSSaver as two more checkpointers, and an outcome record.

Load it with `-p tests_upstream.plugin`. Without patching the suite's files, it replaces the suite's
`sync_checkpointer` and `async_checkpointer` fixtures, as the suite's conftest is registered and
before pytest reads its fixtures, by fixtures with the same parameters plus SAVERS, delegating the
suite's own parameters to the suite's own fixture functions. It keeps only the tests that use one of
those fixtures, and writes each test's outcome, with its checkpointer, to `--agentfs-outcomes`.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import tempfile
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
from _pytest.fixtures import getfixturemarker  # the one way to read a defined fixture's params (pytest has no public one)
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer

import agentfs
from agentfs.integrations.langgraph import AgentFSSaver

FIXTURES = ("sync_checkpointer", "async_checkpointer")
AGENTFS, AGENTFS_AES = "agentfs", "agentfs_aes"
SAVERS = (AGENTFS, AGENTFS_AES)
AES_KEY = b"1234567890123456"  # the key of the suite's own sqlite_aes checkpointer


@contextlib.contextmanager
def agentfs_saver(name: str) -> Iterator[AgentFSSaver]:
    """A saver on a fresh store; `agentfs_aes` encrypts every value with AES as the suite's sqlite_aes does.

    durability="process": the stock savers it runs beside keep their data in memory.
    """
    serde = EncryptedSerializer.from_pycryptodome_aes(key=AES_KEY) if name == AGENTFS_AES else None
    with tempfile.TemporaryDirectory(prefix="agentfs-upstream-") as root:
        store = agentfs.open(Path(root) / ".agentfs", durability="process")
        try:
            yield AgentFSSaver(store, serde=serde)
        finally:
            store.close()


def _params(fixture: Any, name: str) -> list[Any]:
    marker = getfixturemarker(fixture)
    if marker is None or not marker.params:
        raise pytest.UsageError(f"LangGraph's conftest: {name} is not a parametrized fixture; this plugin cannot extend it")
    return list(marker.params)


def _sync_checkpointer(original: Any) -> Any:
    suite_fixture: Callable[[pytest.FixtureRequest], Iterator[Any]] = inspect.unwrap(original)

    @pytest.fixture(name="sync_checkpointer", params=[*_params(original, "sync_checkpointer"), *SAVERS])
    def sync_checkpointer(request: pytest.FixtureRequest) -> Iterator[Any]:
        if request.param in SAVERS:
            with agentfs_saver(request.param) as saver:
                yield saver
        else:
            with contextlib.contextmanager(suite_fixture)(request) as saver:
                yield saver

    return sync_checkpointer


def _async_checkpointer(original: Any) -> Any:
    suite_fixture: Callable[[pytest.FixtureRequest], AsyncIterator[Any]] = inspect.unwrap(original)

    @pytest.fixture(name="async_checkpointer", params=[*_params(original, "async_checkpointer"), *SAVERS])
    async def async_checkpointer(request: pytest.FixtureRequest) -> AsyncIterator[Any]:
        if request.param in SAVERS:
            with agentfs_saver(request.param) as saver:
                yield saver
        else:
            async with contextlib.asynccontextmanager(suite_fixture)(request) as saver:
                yield saver

    return async_checkpointer


@pytest.hookimpl(tryfirst=True)  # before pytest's fixture manager reads the conftest's fixtures
def pytest_plugin_registered(plugin: object) -> None:
    if isinstance(plugin, ModuleType) and plugin.__name__ == "tests.conftest" and all(hasattr(plugin, name) for name in FIXTURES):
        plugin.sync_checkpointer = _sync_checkpointer(plugin.sync_checkpointer)  # type: ignore[attr-defined]
        plugin.async_checkpointer = _async_checkpointer(plugin.async_checkpointer)  # type: ignore[attr-defined]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--agentfs-outcomes", help="write each checkpointer test's outcome to this JSON file")


class Outcomes:
    """Each kept test's checkpointer, the test it is a variant of, and how it ended."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.tests: dict[str, dict[str, Any]] = {}

    @pytest.hookimpl(trylast=True)
    def pytest_collection_modifyitems(self, config: pytest.Config, items: list[pytest.Item]) -> None:
        kept, dropped = [], []
        for item in items:
            callspec = getattr(item, "callspec", None)
            fixture = next((name for name in FIXTURES if callspec is not None and name in callspec.params), None)
            if fixture is None or callspec is None:
                dropped.append(item)
                continue
            kept.append(item)
            # the variants of one test share their other parameters' values (the same objects within a session)
            others = sorted((name, repr(value)) for name, value in callspec.params.items() if name != fixture)
            self.tests[item.nodeid] = {
                "variant_of": f"{item.nodeid.split('[', 1)[0]} {others}",
                "saver": callspec.params[fixture],
                "outcome": "passed",
                "reason": "",
            }
        if dropped:
            config.hook.pytest_deselected(items=dropped)
            items[:] = kept

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        test = self.tests.get(report.nodeid)
        if test is None or test["outcome"] == "failed":
            return
        if report.failed:
            last_line = (report.longreprtext.strip().splitlines() or [""])[-1]
            test["outcome"], test["reason"] = "failed", f"{report.when}: {last_line}"
        elif report.skipped and test["outcome"] == "passed":
            reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
            test["outcome"], test["reason"] = "skipped", reason

    def pytest_sessionfinish(self) -> None:
        self.path.write_text(json.dumps(self.tests, indent=1))


def pytest_configure(config: pytest.Config) -> None:
    path = config.getoption("--agentfs-outcomes")
    if path:
        config.pluginmanager.register(Outcomes(Path(path)), "agentfs-outcomes")
