"""The main demo: checkpoint an agent, sync it to a remote, kill it, resume it on "another machine".

  machine A: the agent commits a step at a time into demo/machine-a/.agentfs, while
             `agentfs sync REMOTE --watch` (a separate process) pushes every commit and journal
             record; the agent is killed with SIGKILL in the middle of a step, after that step's
             tool call was journaled; SIGTERM makes the daemon drain and exit.
  machine B: an empty store at demo/machine-b/.agentfs opened with remote=REMOTE resumes the
             run from its latest checkpoint, fetching only what that checkpoint needs, reuses the
             journaled result of the interrupted step's tool call instead of calling again, and finishes.

Each invocation starts a fresh run (demo/research-agent-<time>-<random>): a remote kept from an
earlier invocation holds that invocation's run and journal, which must not be resumed as this one's.

REMOTE defaults to a local directory (demo/remote, emptied first); pass any fsspec URL instead, e.g.
  python examples/cross_machine_resume.py s3://my-bucket/agents    (credentials from the usual AWS chain)
  python examples/cross_machine_resume.py gs://my-bucket/agents    (pip install 'agentfs-store[gcs]')
"""

from __future__ import annotations

import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import agentfs

HERE = Path(__file__).resolve().parent
DEMO = Path("demo").resolve()
KILL_AFTER_STEP = 5


def agentfs_command() -> list[str]:
    script = Path(sys.executable).with_name("agentfs")
    return [str(script)] if script.exists() else [sys.executable, "-m", "agentfs.cli.main"]


def main() -> int:
    remote = sys.argv[1] if len(sys.argv) > 1 else (DEMO / "remote").as_uri()
    shutil.rmtree(DEMO / "machine-a", ignore_errors=True)
    shutil.rmtree(DEMO / "machine-b", ignore_errors=True)
    if remote.startswith("file://"):
        shutil.rmtree(DEMO / "remote", ignore_errors=True)
    run_name = f"demo/research-agent-{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"  # never an earlier invocation's
    store_a = DEMO / "machine-a" / ".agentfs"
    agentfs.open(store_a).close()
    print(f"== machine A: agent + sync daemon -> {remote}, run {run_name}")
    daemon = subprocess.Popen([*agentfs_command(), "--store", str(store_a), "sync", remote, "--watch"])
    agent_command = [sys.executable, str(HERE / "agent_loop.py"), str(store_a), "--run", run_name]
    agent = subprocess.Popen(agent_command, stdout=subprocess.PIPE, text=True)
    assert agent.stdout is not None
    for line in agent.stdout:
        print(line, end="")
        if f"step {KILL_AFTER_STEP + 1}: tool called" in line:
            agent.send_signal(signal.SIGKILL)
            print(f"== machine A: agent killed with SIGKILL during step {KILL_AFTER_STEP + 1}, after its tool call")
            break
    agent.wait()
    daemon.send_signal(signal.SIGTERM)
    if daemon.wait(timeout=60) != 0:
        print("sync daemon did not exit cleanly", file=sys.stderr)
        return 1
    print("== machine A: sync daemon drained and stopped")
    subprocess.run([*agentfs_command(), "--store", str(store_a), "status"], check=True)

    print("== machine B: empty store, resuming from the remote")
    store_b = DEMO / "machine-b" / ".agentfs"
    with agentfs.open(store_b, remote=remote) as other:
        latest = other.run(run_name).latest()
        assert latest is not None, "nothing reached the remote"
        print(f"== machine B: latest checkpoint {latest.id} is step {latest.state['step']}")
    env = dict(os.environ)
    finished = subprocess.run([sys.executable, str(HERE / "agent_loop.py"), str(store_b), remote, "--run", run_name], env=env, check=True)
    with agentfs.open(store_b, remote=remote) as other:
        final = other.run(run_name).latest()
        assert final is not None and final.state["step"] == 12
        steps = [m["step"] for m in final.state["messages"]]
        assert steps == list(range(1, 13)), steps
        print(f"== machine B: finished at step {final.state['step']}; report.md is {final.artifacts['report.md'].size} bytes")
        print(f"== machine B: verify: {other.verify()}")
    subprocess.run([*agentfs_command(), "--store", str(store_b), "sync", remote], check=True)
    print("== machine B: pushed its steps back; any machine can resume from here")
    return finished.returncode


if __name__ == "__main__":
    sys.exit(main())
