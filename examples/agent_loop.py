"""A toy agent: each step appends a message to its conversation, writes a report, and commits.

It resumes from the latest checkpoint of its run, wherever that checkpoint came from. Used by
quickstart.py and cross_machine_resume.py; run it alone with: python agent_loop.py STORE [REMOTE]
"""

from __future__ import annotations

import hashlib
import sys
import time

import agentfs

RUN = "demo/research-agent"
STEPS = 12


def think(step: int) -> str:
    """A deterministic stand-in for an LLM call."""
    digest = hashlib.sha256(f"step {step}".encode()).hexdigest()
    return f"Step {step}: looked at source {digest[:8]} and noted {digest[8:40]}."


def main(store_path: str, remote: str | None = None, step_delay: float = 0.2) -> None:
    store = agentfs.open(store_path, remote=remote)
    run = store.run(RUN)
    latest = run.latest()
    state = latest.state if latest else {"step": 0, "messages": [], "notes": {"goal": "write a report"}}
    print(f"[agent] starting at step {state['step']} ({'resumed from ' + latest.id if latest else 'fresh'})", flush=True)
    while state["step"] < STEPS:
        step = state["step"] + 1
        state["messages"].append({"role": "assistant", "step": step, "content": think(step)})
        state["step"] = step
        report = "\n".join(m["content"] for m in state["messages"]).encode()
        checkpoint = run.commit(state, artifacts={"report.md": report}, metadata={"source": "agent_loop"})
        print(f"[agent] committed step {step} as {checkpoint.id}", flush=True)
        time.sleep(step_delay)
    print(f"[agent] done: {STEPS} steps, report of {len(report)} bytes", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else None)
