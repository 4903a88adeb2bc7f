"""The examples the README and the docs point at run to completion, as a newcomer runs them."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run_example(name: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(EXAMPLES / name), *args], cwd=cwd, capture_output=True, text=True, timeout=240, check=False)


def test_quickstart_resumes_after_sigkill(tmp_path: Path) -> None:
    result = run_example("quickstart.py", str(tmp_path / ".agentfs"), cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "agent killed with SIGKILL during step 5" in result.stdout
    assert "step 5: tool already called before the crash" in result.stdout
    assert "(resumed from" in result.stdout
    assert "verify: " in result.stdout and ": ok" in result.stdout


def test_cross_machine_resume_finishes_on_machine_b(tmp_path: Path) -> None:
    result = run_example("cross_machine_resume.py", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "(resumed from" in result.stdout  # step 5, or later if the kill came late on a busy machine
    assert "machine B: finished at step 12" in result.stdout
    assert "step 6: tool already called before the crash; reusing its journaled result" in result.stdout
    assert (tmp_path / "demo" / "remote" / "config").is_file()


def test_langgraph_memory_resumes_with_its_memory_on_machine_b(tmp_path: Path) -> None:
    result = run_example("langgraph_memory.py", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "memories of alice: 2" in result.stdout
    assert "chat-1 found waiting at ('approve',)" in result.stdout
    assert "chat-1 resumed and finished: sent=True" in result.stdout
    assert "chat-2 recalled from machine A's memory: ['I drink green tea every morning'," in result.stdout
    assert ": ok" in result.stdout.split("machine B: verify:")[1]


def test_cross_machine_resume_run_twice_on_one_remote_starts_fresh_each_time(tmp_path: Path) -> None:
    """`make demo REMOTE=s3://...` twice: the second invocation resumes its own run, never the first's journal."""
    remote = (tmp_path / "kept-remote").as_uri()  # not demo/remote: the demo empties only that one
    outputs = []
    for _ in range(2):
        result = run_example("cross_machine_resume.py", remote, cwd=tmp_path)
        assert result.returncode == 0, result.stdout + result.stderr
        outputs.append(result.stdout)
    for output in outputs:
        reused = [line for line in output.splitlines() if "tool already called before the crash" in line]
        assert reused == ["[agent] step 6: tool already called before the crash; reusing its journaled result"], output
        assert "machine B: finished at step 12" in output
