"""What a newcomer met: a missing extra, a usage error, the store a call opens, an artifact source that
cannot be read, an interrupted `agentfs sync`, and a sync block that ends with commits left behind.
(The demo that starts from a fresh run each time: tests/docs/test_examples.py.)"""

from __future__ import annotations

import asyncio
import io
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import agentfs
from agentfs.cli.main import main
from agentfs.extras import install_line
from tests.cli.test_cli import COMMAND, ENV

# (the extra, a module it installs, what fails without it): the module is blocked as if not installed
MISSING_EXTRAS = [
    ("langgraph", "langgraph", "import agentfs.integrations.langgraph"),
    ("langgraph", "langchain_core", "from agentfs.integrations.langgraph import AgentFSSaver"),
    ("openai-agents", "agents", "import agentfs.integrations.openai_agents"),
    ("mcp", "mcp", "import agentfs.integrations.mcp_server"),
    ("mcp", "pydantic", "import agentfs.integrations.mcp_server"),
    ("gcs", "gcsfs", "agentfs.open(sys.argv[1], remote='gs://bucket/agents')"),
    ("s3", "s3fs", "agentfs.open(sys.argv[1], remote='s3://bucket/agents')"),
]


def _without(module: str, code: str, *args: str) -> subprocess.Popen[str]:
    """Python running `code` as if `module` were not installed (None in sys.modules: ModuleNotFoundError on import)."""
    script = f"import sys\nsys.modules[{module!r}] = None\nimport agentfs\n{code}\n"
    return subprocess.Popen([sys.executable, "-c", script, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


# (the module blocked, `agentfs ...` arguments, the extra the one line names)
CLI_MISSING_EXTRAS = [("mcp", ["mcp"], "mcp"), ("pydantic", ["mcp"], "mcp"), ("gcsfs", ["sync", "gs://bucket/agents"], "gcs")]
CLI = "from agentfs.cli.main import main\nsys.exit(main(sys.argv[1:]))"


def test_every_extra_missing_names_the_pip_line_to_run(tmp_path: Path) -> None:
    """Importing or using each integration, remote and `agentfs mcp` without its extra; all at once, each in its own process."""
    root = tmp_path / "store"
    agentfs.open(root).close()
    imports = [_without(module, code, str(tmp_path / f"store-{n}")) for n, (_extra, module, code) in enumerate(MISSING_EXTRAS)]
    commands = [_without(module, CLI, "--store", str(root), *argv) for module, argv, _extra in CLI_MISSING_EXTRAS]
    for (extra, module, _code), process in zip(MISSING_EXTRAS, imports, strict=True):
        _out, err = process.communicate(timeout=120)
        assert process.returncode == 1
        last = err.rstrip().splitlines()[-1]
        assert last.startswith("agentfs.errors.MissingExtra: "), err
        assert f"needs {module}" in last and last.endswith(f"which is not installed: {install_line(extra)}"), last
    for (module, _argv, extra), process in zip(CLI_MISSING_EXTRAS, commands, strict=True):
        _out, err = process.communicate(timeout=120)
        assert process.returncode == 4
        assert len(err.splitlines()) == 1 and err.startswith("agentfs: error: "), err  # one line, no traceback
        assert err.rstrip().endswith(f"needs {module}, which is not installed: {install_line(extra)}"), err


def test_an_extra_too_old_names_the_upgrade_line(tmp_path: Path) -> None:
    """An installed `agents` that lacks what agentfs imports from it (an older SDK): the line says to upgrade the extra."""
    fake = tmp_path / "site" / "agents"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text("")
    (fake / "items.py").write_text("")  # no TResponseInputItem
    env = {**ENV, "PYTHONPATH": os.pathsep.join([str(tmp_path / "site"), *filter(None, [ENV.get("PYTHONPATH")])])}
    command = [sys.executable, "-c", "import agentfs.integrations.openai_agents"]
    result = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120, check=False)
    last = result.stderr.rstrip().splitlines()[-1]
    assert last.startswith("agentfs.errors.MissingExtra: agentfs.integrations.openai_agents cannot use the installed agents ("), last
    assert "TResponseInputItem" in last and last.endswith(f"): {install_line('openai-agents', upgrade=True)}"), last


USAGE_ERRORS = [
    ["sync", "{url}", "--storage-options", "not json"],
    ["sync", "{url}", "--storage-options", "[1, 2]"],
    ["pull", "{url}", "--storage-options", "not json"],
    ["clone", "{url}", "{tmp}/clone", "--storage-options", "not json"],
    ["verify", "--remote", "{url}", "--storage-options", "not json"],
    ["gc", "--remote", "{url}", "--storage-options", "not json"],
    ["sync", "{url}", "--workers", "0"],
    ["sync", "{url}", "--interval", "0"],
    ["sync", "{url}", "--interval", "nan"],
    ["sync", "{url}", "--reconcile-interval", "-1"],
    ["sync", "{url}", "--drain-timeout", "-5"],
    ["sync", ""],
    ["sync", "nosuchprotocol://bucket/agents"],
    ["verify", "--remote", "nosuchprotocol://bucket/agents"],
    ["gc", "--remote", "nosuchprotocol://bucket/agents"],
    ["prune", "r", "--keep-last", "0"],
    ["prune", "r"],
    ["show", "r@notanid"],
    ["log", "../escape"],
    ["sync", "{url}", "--on-commit", "'unclosed", "--watch"],
    ["verify", "--deep"],
    ["verify", "--storage-options", "{{}}"],
    ["retention", "--clear", "--keep-last", "3"],
    ["gc", "--settle", "30"],
    ["gc", "--storage-options", "{{}}"],
    ["gc", "--remote", "{url}", "--no-policy"],
]


@pytest.mark.parametrize("argv", USAGE_ERRORS, ids=[" ".join(argv) or "empty" for argv in USAGE_ERRORS])
def test_every_usage_error_exits_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    root = tmp_path / "store"
    with agentfs.open(root) as store:
        store.run("r").commit({"i": 1})
    monkeypatch.chdir(tmp_path)  # `sync ""` once pushed into the working directory
    words = [word.format(url=(tmp_path / "remote").as_uri(), tmp=tmp_path) for word in argv]
    try:
        code = main(["--store", str(root), *words])
    except SystemExit as exc:  # argparse's own refusal
        code = exc.code
    err = capsys.readouterr().err
    assert code == 2, err
    assert "Traceback" not in err and err.rstrip().splitlines()[-1].startswith("agentfs"), err
    assert not (tmp_path / "remote").exists() and not (tmp_path / "clone").exists()  # nothing was done


def test_open_honours_agentfs_store_as_the_cli_does(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    elsewhere, chosen = tmp_path / "cwd", tmp_path / "chosen"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    monkeypatch.setenv("AGENTFS_STORE", str(chosen))
    with agentfs.open() as store:
        store.run("r").commit({"i": 1})
        assert store.root == chosen
    assert not (elsewhere / ".agentfs").exists()
    env = {**ENV, "AGENTFS_STORE": str(chosen)}
    runs = subprocess.run([*COMMAND, "runs"], capture_output=True, text=True, cwd=elsewhere, env=env, check=False)
    assert runs.returncode == 0 and runs.stdout.splitlines()[1].startswith("r "), runs  # the CLI finds the same store
    monkeypatch.delenv("AGENTFS_STORE")
    with agentfs.open() as store:
        assert store.root == elsewhere / ".agentfs"


def test_the_openai_agents_session_opens_agentfs_store_by_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("agents")
    from agentfs.integrations.openai_agents import AgentFSSession

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("AGENTFS_STORE", str(tmp_path / "chosen"))
    session = AgentFSSession("s")
    try:
        assert session.store.root == tmp_path / "chosen"
    finally:
        session.close()
    assert not (tmp_path / ".agentfs").exists()


def test_open_with_create_false_refuses_a_missing_store_and_creates_nothing(tmp_path: Path) -> None:
    misspelt = tmp_path / ".agnetfs"
    with pytest.raises(agentfs.NotFound, match=f"no agentfs store at {misspelt}"):
        agentfs.open(misspelt, create=False)
    assert not misspelt.exists()
    with agentfs.open(tmp_path / ".agentfs") as store:
        store.run("r").commit({"i": 1})
    with agentfs.open(tmp_path / ".agentfs", create=False) as store:
        assert store.runs() == ["r"]


READ_COMMANDS = [
    ["runs"],
    ["log", "r"],
    ["show", "r"],
    ["cat", "r", "a"],
    ["diff", "r", "s"],
    ["verify"],
    ["journal", "r"],
    ["stats"],
    ["status"],
    ["retention"],
    ["prune", "r", "--keep-last", "1"],
    ["delete", "r"],
    ["gc"],
    ["sync", "{url}"],
]


@pytest.mark.parametrize("argv", READ_COMMANDS, ids=[argv[0] for argv in READ_COMMANDS])
def test_cli_commands_on_a_missing_store_are_not_found_and_create_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    misspelt = tmp_path / ".agnetfs"
    words = [word.format(url=(tmp_path / "remote").as_uri()) for word in argv]
    assert main(["--store", str(misspelt), *words]) == 3
    assert capsys.readouterr().err == f"agentfs: error: no agentfs store at {misspelt} " + (
        "(create one with `agentfs init`, or pass --store PATH or set AGENTFS_STORE)\n"
    )
    assert not misspelt.exists() and not (tmp_path / "remote").exists()


def test_a_closed_or_write_only_file_as_an_artifact_is_refused_by_name(tmp_path: Path) -> None:
    path = tmp_path / "report.md"
    path.write_bytes(b"# report\n")
    closed = path.open("rb")
    closed.close()
    with agentfs.open(tmp_path / "store") as store, path.open("ab") as write_only:
        run = store.run("r")
        with pytest.raises(agentfs.AgentFSError, match=r"artifact 'report.md' \(.*report.md\) is a closed file"):
            run.commit({"i": 1}, artifacts={"report.md": closed})
        with pytest.raises(agentfs.AgentFSError, match=r"artifact 'log' \(.*report.md\) is not open for reading \(mode 'ab'\)"):
            run.commit({"i": 1}, artifacts={"log": write_only})
        unreadable = io.BytesIO(b"x")
        unreadable.readable = lambda: False  # type: ignore[method-assign]
        with pytest.raises(agentfs.AgentFSError, match=r"artifact 'stream' .* is not open for reading"):
            run.commit({"i": 1}, artifacts={"stream": unreadable})
        assert run.ids() == []  # refused before anything was written
        with path.open("rb") as readable:
            assert run.commit({"i": 1}, artifacts={"report.md": readable}).artifacts["report.md"].read_bytes() == b"# report\n"


class SilentServer:
    """A TCP endpoint that accepts connections and never answers: a remote that hangs."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.connected = threading.Event()
        self.held: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self.listener.accept()
            except OSError:
                return
            self.held.append(connection)
            self.connected.set()

    def close(self) -> None:
        self.listener.close()
        for connection in self.held:
            connection.close()


def test_ctrl_c_on_a_one_shot_sync_prints_one_line(tmp_path: Path) -> None:
    root = tmp_path / "store"
    with agentfs.open(root) as store:
        store.run("r").commit({"i": 1})
    server = SilentServer()
    options = f'{{"key": "k", "secret": "s", "client_kwargs": {{"endpoint_url": "http://127.0.0.1:{server.port}"}}}}'
    try:
        process = subprocess.Popen(
            [*COMMAND, "--store", str(root), "sync", "s3://bucket/agents", "--storage-options", options],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=ENV,
        )
        assert server.connected.wait(60), "the push never reached the remote"
        process.send_signal(signal.SIGINT)
        _out, err = process.communicate(timeout=60)
    finally:
        server.close()
    assert process.returncode == 130
    assert err == "agentfs: sync interrupted (Ctrl-C) before it finished\n"


def test_leaving_a_sync_block_with_commits_unpushed_says_how_many_and_why(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_bytes(b"")
    url = (blocker / "remote").as_uri()  # below a regular file: every write fails
    with agentfs.open(tmp_path / "store") as store, caplog.at_level(logging.WARNING, logger="agentfs.sync"):
        with store.sync(url, exit_timeout=1.0):
            for i in range(3):
                store.run("r").commit({"i": i})
            with store.run("r").tool_call("search", {"q": "x"}) as call:
                call.result = "found"
        warnings = [record.getMessage() for record in caplog.records if "stopped after" in record.getMessage()]
        assert len(warnings) == 1, caplog.text
        assert warnings[0].startswith(f"agentfs sync to {url} stopped after 1s with 3 checkpoints and ")
        assert "not pushed; last error: " in warnings[0] and "NotADirectoryError" in warnings[0], warnings[0]
        caplog.clear()

        async def leave_async_block() -> None:
            async with store.async_sync(url, exit_timeout=1.0):
                await store.run("r").acommit({"i": 3})

        asyncio.run(leave_async_block())
        assert "stopped after 1s with 4 checkpoints and " in caplog.text
        caplog.clear()
        daemon = store.sync(url)  # stop() says so by what it returns, and logs nothing more than the failed attempts
        assert daemon.stop(timeout=0.5) is False
        assert "stopped after" not in caplog.text


def test_a_sync_block_that_pushed_everything_says_nothing(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    with (
        agentfs.open(tmp_path / "store") as store,
        caplog.at_level(logging.WARNING, logger="agentfs.sync"),
        store.sync((tmp_path / "remote").as_uri()),
    ):
        store.run("r").commit({"i": 1})
    assert "stopped after" not in caplog.text
