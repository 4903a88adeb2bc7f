"""A toy agent: each step calls a tool, appends a message to its conversation, writes a report, and commits.

It resumes from the latest checkpoint of its run, wherever that checkpoint came from. The tool call
goes through the run's journal (`run.once`): a step cut short after its call is resumed with the
recorded result instead of calling again. Used by quickstart.py and cross_machine_resume.py; run it
alone with: python agent_loop.py STORE [REMOTE] [--run NAME]
"""

from __future__ import annotations

import argparse
import hashlib
import time

import agentfs

RUN = "demo/research-agent"  # the default run; cross_machine_resume.py names a fresh one per invocation
STEPS = 12


def think(step: int) -> str:
    """A deterministic stand-in for an LLM call."""
    digest = hashlib.sha256(f"step {step}".encode()).hexdigest()
    return f"Step {step}: looked at source {digest[:8]} and noted {digest[8:40]}."


def main(store_path: str, remote: str | None = None, run_name: str = RUN, step_delay: float = 0.2) -> None:
    store = agentfs.open(store_path, remote=remote)
    run = store.run(run_name)
    latest = run.latest()
    state = latest.state if latest else {"step": 0, "messages": [], "notes": {"goal": "write a report"}}
    print(f"[agent] starting at step {state['step']} ({'resumed from ' + latest.id if latest else 'fresh'})", flush=True)
    while state["step"] < STEPS:
        step = state["step"] + 1
        key = f"think:{step}"
        before = run.journal.get(key)
        try:
            content = run.once(key, think, step)  # the tool call: journaled, never made twice
        except agentfs.InFlight:  # killed mid-call: a real tool would check whether it happened
            run.journal.abandon(key, "think() has no side effect: safe to call again")
            content = run.once(key, think, step)
        if before is not None and before.status == "ok":
            print(f"[agent] step {step}: tool already called before the crash; reusing its journaled result", flush=True)
        else:
            print(f"[agent] step {step}: tool called, result journaled", flush=True)
        time.sleep(step_delay)  # the rest of the step's work
        state["messages"].append({"role": "assistant", "step": step, "content": content})
        state["step"] = step
        report = "\n".join(m["content"] for m in state["messages"]).encode()
        checkpoint = run.commit(state, artifacts={"report.md": report}, metadata={"source": "agent_loop"})
        print(f"[agent] committed step {step} as {checkpoint.id}", flush=True)
    print(f"[agent] done: {STEPS} steps, report of {len(report)} bytes", flush=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="a toy agent that checkpoints each step")
    parser.add_argument("store")
    parser.add_argument("remote", nargs="?")
    parser.add_argument("--run", default=RUN, help=f"the run to resume or start (default {RUN})")
    args = parser.parse_args()
    main(args.store, args.remote, args.run)
