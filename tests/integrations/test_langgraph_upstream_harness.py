"""The harness that runs LangGraph's own suite with AgentFSSaver (tests_upstream/) on a small suite of the same shape.

LangGraph's real suite runs in `make test-langgraph-upstream`; here a conftest built like its own
(a `sync_checkpointer` and an `async_checkpointer` fixture parametrized by name) shows that the
plugin adds both agentfs checkpointers without touching the suite's files, keeps only the
checkpointer tests, and that the comparison fails exactly the tests both stock savers pass.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("langgraph.checkpoint.base")

from tests_upstream.__main__ import compare, run, settle

CONFTEST = """
    import contextlib
    import pytest
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    @pytest.fixture(params=["memory", "sqlite"])
    def sync_checkpointer(request):
        if request.param == "memory":
            yield InMemorySaver()
        else:
            with SqliteSaver.from_conn_string(":memory:") as saver:
                yield saver

    @pytest.fixture(params=["memory", "sqlite_aio"])
    async def async_checkpointer(request):
        if request.param == "memory":
            yield InMemorySaver()
        else:
            async with AsyncSqliteSaver.from_conn_string(":memory:") as saver:
                yield saver

    @pytest.fixture
    def anyio_backend():
        return "asyncio"
"""

TESTS = """
    from pathlib import Path

    import pytest
    from langgraph.checkpoint.base import empty_checkpoint
    from langgraph.checkpoint.sqlite import SqliteSaver

    CONFIG = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}

    def _checkpoint():
        checkpoint = empty_checkpoint()
        checkpoint.update(channel_values={"v": "value"}, channel_versions={"v": 1})
        return checkpoint

    @pytest.mark.parametrize("repeat", ["once", "twice"])
    def test_round_trip(sync_checkpointer, repeat):
        for _ in range(1 if repeat == "once" else 2):
            config = sync_checkpointer.put(CONFIG, _checkpoint(), {}, {"v": 1})
        assert sync_checkpointer.get_tuple(config).checkpoint["channel_values"] == {"v": "value"}

    @pytest.mark.anyio
    async def test_round_trip_async(async_checkpointer):
        config = await async_checkpointer.aput(CONFIG, _checkpoint(), {}, {"v": 1})
        assert (await async_checkpointer.aget_tuple(config)).checkpoint["channel_values"] == {"v": "value"}

    def test_only_stock_savers_pass(sync_checkpointer):
        assert type(sync_checkpointer).__module__.startswith("langgraph.")

    def test_sqlite_fails_so_agentfs_may(sync_checkpointer):
        assert not isinstance(sync_checkpointer, SqliteSaver) and type(sync_checkpointer).__module__.startswith("langgraph.")

    def test_skipped_for_agentfs(sync_checkpointer):
        if not type(sync_checkpointer).__module__.startswith("langgraph."):
            pytest.skip("needs a stock saver")

    def test_fails_once_with_agentfs(sync_checkpointer, request):
        # the first run of each agentfs variant fails, as a timing test may on a loaded machine; later runs pass
        ran = Path(__file__).with_name(f"{request.node.name}.ran")
        if not type(sync_checkpointer).__module__.startswith("langgraph.") and not ran.exists():
            ran.write_text("")
            raise AssertionError("missed its window")

    def test_without_a_checkpointer():
        raise AssertionError("not a checkpointer test: the plugin deselects it")
"""


def _suite(tmp_path: Path) -> Path:
    suite = tmp_path / "suite"
    (suite / "tests").mkdir(parents=True)
    (suite / "tests" / "__init__.py").write_text("")
    (suite / "tests" / "conftest.py").write_text(textwrap.dedent(CONFTEST))
    (suite / "tests" / "test_shape.py").write_text(textwrap.dedent(TESTS))
    (suite / "pytest.ini").write_text("[pytest]\n")
    return suite


def test_the_plugin_adds_agentfs_savers_and_the_comparison_fails_only_what_stock_savers_pass(tmp_path: Path) -> None:
    suite = _suite(tmp_path)
    outcomes = tmp_path / "outcomes.json"
    assert run(suite, outcomes, []) == 1  # pytest itself reports the failures
    tests = json.loads(outcomes.read_text())

    by_name = {nodeid.split("::")[1]: test for nodeid, test in tests.items()}
    assert {name for name in by_name if name.startswith("test_round_trip[")} == {
        f"test_round_trip[{saver}-{repeat}]" for saver in ("memory", "sqlite", "agentfs", "agentfs_aes") for repeat in ("once", "twice")
    }
    assert {name for name in by_name if name.startswith("test_round_trip_async")} == {
        f"test_round_trip_async[{saver}]" for saver in ("memory", "sqlite_aio", "agentfs", "agentfs_aes")
    }
    assert not any(name.startswith("test_without_a_checkpointer") for name in by_name)
    assert all(by_name[name]["outcome"] == "passed" for name in by_name if name.startswith("test_round_trip"))
    assert by_name["test_skipped_for_agentfs[agentfs]"] == {**by_name["test_skipped_for_agentfs[agentfs]"], "outcome": "skipped"}

    result = compare(tests)
    assert sorted(line.split(": ")[0].split("::")[1] for line in result.regressions) == [
        "test_fails_once_with_agentfs[agentfs]",
        "test_fails_once_with_agentfs[agentfs_aes]",
        "test_only_stock_savers_pass[agentfs]",
        "test_only_stock_savers_pass[agentfs_aes]",
        "test_skipped_for_agentfs[agentfs]",  # a skip with ours where both stock savers pass is a regression too
        "test_skipped_for_agentfs[agentfs_aes]",
    ]
    assert sorted(line.split(": ")[0].split("::")[1] for line in result.also_stock) == [
        "test_sqlite_fails_so_agentfs_may[agentfs]",
        "test_sqlite_fails_so_agentfs_may[agentfs_aes]",
    ]
    assert result.counts["agentfs"] == {"passed": 3, "failed": 3, "skipped": 1}
    assert result.skips == {("agentfs", "Skipped: needs a stock saver"): 1, ("agentfs_aes", "Skipped: needs a stock saver"): 1}


def test_a_failure_that_passes_when_run_again_is_flaky_and_one_that_fails_again_stays(tmp_path: Path) -> None:
    suite = _suite(tmp_path)
    outcomes = tmp_path / "outcomes.json"
    run(suite, outcomes, [])
    result = compare(json.loads(outcomes.read_text()))
    flaky = settle(suite, result, [])
    assert sorted(nodeid.split("::")[1] for nodeid in flaky) == [
        "test_fails_once_with_agentfs[agentfs]",
        "test_fails_once_with_agentfs[agentfs_aes]",
    ]
    assert sorted(line.split(": ")[0].split("::")[1] for line in result.regressions) == [
        "test_only_stock_savers_pass[agentfs]",  # failed twice: a regression
        "test_only_stock_savers_pass[agentfs_aes]",
        "test_skipped_for_agentfs[agentfs]",  # a skip is never rerun
        "test_skipped_for_agentfs[agentfs_aes]",
    ]
