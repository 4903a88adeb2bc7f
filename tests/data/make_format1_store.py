"""Make the format-1 test store (tests/data/format1-store.tar.gz) and what it holds (format1-store.json).

Run once with the format-1 code (agentfs before the format-2 engine); the committed bytes, not this
script, are the test data: `agentfs upgrade` is tested on them after the format-1 writer is gone.

    python tests/data/make_format1_store.py tests/data

The store holds: a run with growing states, a small and a chunked (> 1 MiB, so FastCDC tree nodes)
artifact and a journal (two `once` results and a failed call); a fork of it with a commit of its own;
a run pruned to its last two checkpoints and gc'd (retirement records, objects gone); a deleted run
(a retirement record and nothing else); runs `a` and `a/b` nested in one another; a retention policy
in the config; and remotes/ state from a push to a local directory remote.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import random
import shutil
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

import agentfs
from agentfs.format.retirement import decode_retirement

STORE = "format1-store"
CHUNKED = random.Random(1).randbytes(1_500_000)  # > 1 MiB: cut by FastCDC into chunks under a tree node


def _search(query: str) -> dict[str, Any]:
    return {"query": query, "hits": ["doc-1", "doc-7"]}


def _failing() -> None:
    raise RuntimeError("the tool was down")


def populate(store: agentfs.Store) -> None:
    main = store.run("research/main")
    messages: list[dict[str, str]] = []
    for step in range(4):
        messages.append({"role": "assistant", "content": f"step {step} " + "words " * (200 * step)})
        artifacts: dict[str, bytes] = {"report.md": f"# Report {step}\n".encode()}
        if step == 2:
            artifacts["model.bin"] = CHUNKED
        main.commit({"step": step, "messages": list(messages)}, artifacts=artifacts, metadata={"step": step})
    main.once("search-1", _search, "agents")
    main.once("search-2", lambda: ["a", "b"])
    with contextlib.suppress(RuntimeError):
        main.once("broken", _failing)
    fork_point = main.ids()[2]
    branch = main.fork(fork_point, "research/branch")
    branch.commit({"step": 10, "branch": True}, keep_artifacts=True)

    scratch = store.run("scratch")
    for step in range(5):
        scratch.commit({"step": step}, artifacts={"out.bin": random.Random(step).randbytes(30_000)})
    scratch.prune(keep_last=2)

    gone = store.run("gone")
    gone.commit({"doomed": True})
    gone.delete()

    store.run("a").commit({"level": "a"})
    nested = store.run("a/b")
    nested.commit({"level": "a/b", "n": 1})
    nested.commit({"level": "a/b", "n": 2}, artifacts={"notes.txt": b"nested run\n"})

    store.gc(grace=0)
    store.set_retention(keep_last=100)


def describe(store: agentfs.Store, root: Path) -> dict[str, Any]:
    """What the store holds, as the upgraded store must show it."""
    runs: dict[str, Any] = {}
    for name in [*sorted(store.runs()), "gone"]:
        run = store.run(name)
        checkpoints = {}
        for checkpoint_id in run.ids():
            checkpoint = run.get(checkpoint_id)
            checkpoints[checkpoint_id] = {
                "state": checkpoint.state,
                "metadata": checkpoint.metadata,
                "parent": checkpoint.parent,
                "forked_from": list(checkpoint.forked_from) if checkpoint.forked_from else None,
                "artifacts": {n: hashlib.sha256(a.read_bytes()).hexdigest() for n, a in checkpoint.artifacts.items()},
            }
        calls = {}
        for call in run.journal.calls():
            calls[call.key] = {"status": call.status, "result": call.result if call.status == "ok" else None}
        runs[name] = {"ids": run.ids(), "head": run.head_id(), "checkpoints": checkpoints, "journal": calls}
    retired: dict[str, list[str]] = {}
    for record in sorted((root / "runs").glob("**/retired/*")):
        body = decode_retirement(record.read_bytes(), record.parent.parent.relative_to(root / "runs").as_posix(), record.name, str(record))
        retired.setdefault(body.run, []).extend(body.checkpoints)
    config = json.loads((root / "config").read_text())
    return {"config": config, "runs": runs, "retired": retired}


def main(out: Path) -> None:
    with tempfile.TemporaryDirectory() as work:
        root = Path(work) / STORE
        remote = Path(work) / "remote"
        with agentfs.open(root) as store:
            populate(store)
            with store.sync(str(remote)) as daemon:
                assert daemon.flush(timeout=60), "the push to the local remote did not finish"
            described = describe(store, root)
        shutil.rmtree(root / "tmp")
        (root / "tmp").mkdir()
        with tarfile.open(out / f"{STORE}.tar.gz", "w:gz") as archive:
            archive.add(root, arcname=STORE, filter=_anonymous)
    (out / f"{STORE}.json").write_text(json.dumps(described, indent=1, sort_keys=True) + "\n")


def _anonymous(info: tarfile.TarInfo) -> tarfile.TarInfo:
    info.uid = info.gid = 0
    info.uname = info.gname = ""
    return info


if __name__ == "__main__":
    main(Path(sys.argv[1]))
