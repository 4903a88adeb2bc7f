"""A child process that runs an agent's turns and is SIGKILLed at a chosen point (the framework crash tests).

The child prints one line per event (`turn <question>` once a turn is durable and pushed, `paid <n>`
once a journaled tool call is), and at the event the parent names it blocks on stdin, where the parent
SIGKILLs it: a kill at a known point, after the tool call, before the turn's commit.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

REPOSITORY = Path(__file__).resolve().parents[2]


def start(module: str, store: Path, url: str, storage_options: dict[str, Any], ledger: Path, stop_at: str) -> subprocess.Popen[str]:
    """`python -m <module> <store> <url> <storage options as JSON> <ledger> <stop_at>` from the repository's root."""
    arguments = [sys.executable, "-m", module, str(store), url, json.dumps(storage_options), str(ledger), stop_at]
    return subprocess.Popen(arguments, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=REPOSITORY)


def kill_at(child: subprocess.Popen[str], stop_at: str) -> list[str]:
    """The lines the child printed up to and with `stop_at`; then SIGKILL while it waits on stdin."""
    assert child.stdout is not None
    lines: list[str] = []
    while not lines or lines[-1] != stop_at:
        line = child.stdout.readline()
        assert line, f"the child ended before {stop_at!r}: {lines}"
        lines.append(line.rstrip("\n"))
    child.send_signal(signal.SIGKILL)
    child.wait(timeout=30)
    return lines


def report(line: str, stop_at: str) -> None:
    """In the child: print `line`; block there (to be killed) if it is the parent's stop point."""
    print(line, flush=True)
    if line == stop_at:
        sys.stdin.readline()


def pay(ledger: str, amount: int) -> str:
    """The outside world's side effect: one line in the ledger per payment made."""
    with open(ledger, "a") as file:
        file.write(f"{amount}\n")
    return f"paid {amount}"


def payments(ledger: Path) -> list[int]:
    return [int(line) for line in ledger.read_text().split()] if ledger.exists() else []
