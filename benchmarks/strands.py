"""Strands' rows of workload 16: what persisting one agent turn costs through AgentFSSessionRepository next to
Strands' own FileSessionManager, and the bytes on disk after N turns. Run it from the Strands venv (strands-agents
pins mcp<2.2, so it is not in the bench venv; `make test-strands` makes .venv-strands):

    .venv-strands/bin/python -m benchmarks.strands [--turns 1000] [--json]

A turn is what Strands' RepositorySessionManager writes for one question answered with one tool call: four
`create_message` (the question, the model's tool call, the tool's result, the answer; the texts of workload 16)
and one `update_agent` (the agent's state changed). The records are built before timing; only the repository
calls are timed; then a fresh repository reads the messages back (`list_messages`, as an agent that resumes
the session does; Strands' `SessionMessage.from_dict` is much of it on both sides). agentfs runs at its
default durability (each call one commit with an fdatasync: it survives power loss) and at
durability="process" (survives a killed process, as FileSessionManager's files do, which it writes without
fsync). Sizes are the apparent size of every file each keeps (and, beside it, what the file system
allocated: one block at least per file). workload 16 runs this module with .venv-strands/bin/python when
that venv exists and reports its rows with the others.
"""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any, Literal

from strands.session.file_session_manager import FileSessionManager
from strands.session.session_repository import SessionRepository
from strands.types.session import Session, SessionAgent, SessionMessage, SessionType

from agentfs.integrations.strands import AgentFSSessionRepository

from .peers import tree_size
from .store_bytes import store_bytes
from .workloads.frameworks import _turn_texts

SESSION, AGENT = "bench", "agent"


def turn_records(turn: int) -> tuple[list[SessionMessage], SessionAgent]:
    question, result, answer = _turn_texts(turn)
    call = f"call-{turn}"
    messages: list[Any] = [
        {"role": "user", "content": [{"text": question}]},
        {"role": "assistant", "content": [{"toolUse": {"toolUseId": call, "name": "search", "input": {"query": question[:60]}}}]},
        {"role": "user", "content": [{"toolResult": {"toolUseId": call, "status": "success", "content": [{"text": result}]}}]},
        {"role": "assistant", "content": [{"text": answer}]},
    ]
    first = 4 * turn
    agent = SessionAgent(AGENT, {"turns": turn + 1}, {"__name__": "SlidingWindowConversationManager", "removed_message_count": 0})
    return [SessionMessage.from_message(message, first + n) for n, message in enumerate(messages)], agent


def persist(repository: SessionRepository, turns: list[tuple[list[SessionMessage], SessionAgent]]) -> float:
    """Seconds the repository calls of `turns` took (the session and agent created before)."""
    if repository.read_session(SESSION) is None:
        repository.create_session(Session(SESSION, SessionType.AGENT))
    repository.create_agent(SESSION, SessionAgent(AGENT, {}, {}))
    start = time.perf_counter()
    for messages, agent in turns:
        for message in messages:
            repository.create_message(SESSION, AGENT, message)
        repository.update_agent(SESSION, agent)
    total = time.perf_counter() - start
    assert len(repository.list_messages(SESSION, AGENT)) == 4 * len(turns)
    return total


def allocated(path: Path) -> int:
    """The bytes the file system allocated to every file under `path` (st_blocks: what `du` counts)."""
    return sum(file.stat().st_blocks * 512 for file in path.rglob("*") if file.is_file())


def resumed(repository: SessionRepository) -> float:
    """Seconds a fresh repository takes to read the agent's messages back, as an agent resuming the session does."""
    start = time.perf_counter()
    repository.list_messages(SESSION, AGENT)
    return time.perf_counter() - start


def measure(turns: int, root: Path) -> dict[str, Any]:
    records = [turn_records(turn) for turn in range(turns)]
    result: dict[str, Any] = {"turns": turns}
    durabilities: list[Literal["power", "process"]] = ["power", "process"]
    for durability in durabilities:
        path = root / f"agentfs-{durability}"
        with AgentFSSessionRepository(path, durability=durability) as repository:
            seconds = persist(repository, records)
        with AgentFSSessionRepository(path) as repository:
            resume = resumed(repository)
        result[f"agentfs_{durability}"] = {
            "ms_per_turn": seconds / turns * 1000,
            "bytes": tree_size(path),
            "allocated": allocated(path),
            "resume_s": resume,
            "split": store_bytes(path).per(turns, "turn"),
        }
    path = root / "strands-files"
    seconds = persist(FileSessionManager(session_id=SESSION, storage_dir=str(path)), records)
    resume = resumed(FileSessionManager(session_id=SESSION, storage_dir=str(path)))
    result["file_session_manager"] = {
        "ms_per_turn": seconds / turns * 1000,
        "bytes": tree_size(path),
        "allocated": allocated(path),
        "resume_s": resume,
    }
    return result


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.strands", description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--json", action="store_true", help="print one JSON object (for workload 16)")
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="agentfs-bench-strands-"))
    try:
        result = measure(args.turns, root)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if args.json:
        print(json.dumps(result))
        return
    print(f"Strands, {args.turns} turns: persistence per turn (ms), apparent and allocated bytes on disk")
    for name in ("agentfs_power", "agentfs_process", "file_session_manager"):
        row = result[name]
        print(
            f"  {name:22} {row['ms_per_turn']:8.3f} ms/turn {row['bytes']:>12,} bytes {row['allocated']:>12,} allocated"
            f" {row['resume_s']:8.3f} s to read the messages back"
        )
        if "split" in row:
            print(f"    {row['split']}")


if __name__ == "__main__":
    main()
