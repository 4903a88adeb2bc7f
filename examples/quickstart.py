"""Single machine: an agent loop checkpoints each step, is killed with SIGKILL partway, and resumes.

python examples/quickstart.py [STORE]      (default: demo/quickstart/.agentfs)
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
from pathlib import Path

import agentfs

HERE = Path(__file__).resolve().parent


def main() -> int:
    store_path = Path(sys.argv[1] if len(sys.argv) > 1 else "demo/quickstart/.agentfs").resolve()
    shutil.rmtree(store_path, ignore_errors=True)
    agent = subprocess.Popen([sys.executable, str(HERE / "agent_loop.py"), str(store_path)], stdout=subprocess.PIPE, text=True)
    assert agent.stdout is not None
    for line in agent.stdout:
        print(line, end="")
        if "step 5: tool called" in line:
            agent.send_signal(signal.SIGKILL)
            print("== agent killed with SIGKILL during step 5, after its tool call; restarting it")
            break
    agent.wait()
    subprocess.run([sys.executable, str(HERE / "agent_loop.py"), str(store_path)], check=True)
    with agentfs.open(store_path) as store:
        run = store.run("demo/research-agent")
        history = run.history()
        print(f"== {len(history)} checkpoints; newest first: {[cp.state['step'] for cp in history]}")
        print(f"== verify: {store.verify()}")
        assert [cp.state["step"] for cp in history] == list(range(12, 0, -1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
