"""Make format-2 test vectors: a small plaintext store and a file remote pushed from it (tests/vectors/format2-entries2/;
tests/vectors/format2/ was made by an agentfs that wrote log entries of version 1).

Run by hand from the repository root when the vectors must be made again (the committed bytes, not this
script, are the test data; tests/format/test_vectors_from_spec.py reads them from docs/FORMAT.md alone):

    python tests/vectors/make_vectors.py tests/vectors/format2-entries2

Ids, times, host, pid and pack ids are made deterministic by patching agentfs's sources of them, so a
second run writes the same bytes. What the store holds is written to vectors.json there, which the
description (format2/README.md, and format2-entries2/README.md for what differs) explains.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import msgpack
from ulid import ULID

import agentfs
import agentfs.engine.repository
import agentfs.engine.segment_writer
import agentfs.format.config
import agentfs.format.pack
import agentfs.ids

START_NS = 1_767_225_600_000_000_000  # 2026-01-01T00:00:00Z
_clock = [START_NS]
_random = random.Random(2)


def _time_ns() -> int:
    _clock[0] += 1_000_000  # one millisecond a call: every id and `created` differs
    return _clock[0]


def _random_digits() -> str:
    return "".join(agentfs.ids.CROCKFORD[_random.randrange(32)] for _ in range(agentfs.ids.RANDOM_DIGITS))


def _pack_id() -> str:
    return f"{_random.getrandbits(64):016x}"


def _words(seed: int, count: int) -> str:
    rng = random.Random(seed)
    vocabulary = ["agent", "tool", "state", "segment", "pack", "chunk", "node", "value", "store", "remote", "fork", "run"]
    return " ".join(rng.choice(vocabulary) + str(rng.randrange(1000)) for _ in range(count))


SMALL = {"step": 1, "note": "inline"}  # a dict: value format 2, under 64 bytes: INLINE
PACKED = _words(1, 600)  # a str of a few KB: format 0, PACKED in the entry
MESSAGES = [_words(100 + i, 40) for i in range(600)]  # a list of ~150 KB: format 1, a TREE of depth 2
ARTIFACT = random.Random(3).randbytes(20_000)  # one chunk (artifacts cut with the large parameters): LOOSE


def populate(store: agentfs.Store) -> None:
    main = store.run("demo/main")
    main.commit({"small": SMALL, "text": PACKED, "pair": (1, "two")}, metadata={"step": 1})
    main.commit(
        {"small": SMALL, "text": PACKED, "messages": MESSAGES, "pair": (1, "two")},
        artifacts={"report.bin": ARTIFACT},
        metadata={"step": 2},
    )
    main.once("search", lambda: {"hits": ["doc-1", "doc-7"]})
    store.gc(grace=0)  # seals the segment (footer, trailer, seal copy); later records go into a new segment
    branch = main.fork(main.ids()[0], "demo/branch")
    branch.commit({"small": {"step": 3, "note": "branch"}, "text": PACKED}, metadata={"step": 3})
    scratch = store.run("demo/scratch")
    scratch.commit({"small": {"step": 4, "note": "retired"}})
    scratch.commit({"small": {"step": 5, "note": "kept"}})
    scratch.prune(keep_last=1)  # a RETIRED record hiding the first checkpoint (still in the segment: no gc after it)


def _described(value: Any) -> dict[str, Any]:
    """A state key's value as vectors.json states it: the value itself, or the sha256 and length of its stored bytes."""
    if value is MESSAGES:
        body = b"".join(msgpack.packb(item) for item in MESSAGES)  # format 1: the items' bytes, no array header
        return {"format": 1, "count": len(MESSAGES), "sha256": hashlib.sha256(body).hexdigest(), "size": len(body), "first": MESSAGES[0]}
    if isinstance(value, tuple):
        return {"format": 0, "ext": 1, "items": list(value)}
    return {"format": 2 if isinstance(value, dict) else 1 if isinstance(value, list) else 0, "value": value}


def describe(store: agentfs.Store) -> dict[str, Any]:
    runs: dict[str, Any] = {}
    for name in sorted(store.runs()):
        run = store.run(name)
        checkpoints = {}
        for checkpoint_id in run.ids():
            checkpoint = run.get(checkpoint_id)
            state = checkpoint.state
            checkpoints[checkpoint_id] = {
                "parent": checkpoint.parent,
                "forked_from": list(checkpoint.forked_from) if checkpoint.forked_from else None,
                "metadata": checkpoint.metadata,
                "state": {key: _described(MESSAGES if key == "messages" and value == MESSAGES else value) for key, value in state.items()},
                "artifacts": {
                    n: {"sha256": hashlib.sha256(a.read_bytes()).hexdigest(), "size": len(a.read_bytes())}
                    for n, a in checkpoint.artifacts.items()
                },
            }
        journal = [{"key": call.key, "status": call.status, "result": call.result} for call in run.journal.calls()]
        runs[name] = {"ids": run.ids(), "head": run.head_id(), "checkpoints": checkpoints, "journal": journal}
    retired = {name: sorted(store.engine.retired_ids(name)) for name in sorted(store.runs())}
    return {"store_id": store.id, "runs": runs, "retired": {name: ids for name, ids in retired.items() if ids}}


def main(out: Path) -> None:
    time.time_ns = _time_ns  # type: ignore[assignment]
    agentfs.ids._random_digits = _random_digits
    agentfs.format.pack.new_pack_id = _pack_id
    agentfs.format.config.ULID = agentfs.ids.new_id  # type: ignore[misc,assignment]  # the store id
    agentfs.engine.segment_writer.ULID = lambda: ULID.from_str(agentfs.ids.new_id())  # type: ignore[misc,assignment]  # a header's writer
    agentfs.engine.repository.HOST = "vectors-host"
    os.getpid = lambda: 4242  # the manifests' writer pid (and the segment slot, pid mod 16)
    with tempfile.TemporaryDirectory() as work:
        root, remote = Path(work) / "store", Path(work) / "remote"
        with agentfs.open(root) as store:
            populate(store)
            with store.sync(str(remote)) as daemon:
                assert daemon.flush(timeout=60), "the push to the file remote did not finish"
            described = describe(store)
        shutil.rmtree(out, ignore_errors=True)
        out.mkdir(parents=True)
        # the data only: locks/, tmp/ and remotes/ (a pusher's private cache) are not part of the format's bytes
        shutil.copytree(root / "segments", out / "store" / "segments")
        shutil.copy(root / "config", out / "store" / "config")
        shutil.copytree(remote, out / "remote", ignore=shutil.ignore_patterns("tmp"))
    (out / "vectors.json").write_text(json.dumps(described, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
