"""LangGraph's savers as peers, fed checkpoints the way LangGraph builds them.

Each ``put`` does what LangGraph's Pregel loop does after a step: a new
checkpoint from ``create_checkpoint`` whose ``channel_values`` hold the whole
state (one channel per top-level key), ``channel_versions`` bumped with the
saver's own ``get_next_version`` for the channels that changed, and those
passed as ``new_versions``. SqliteSaver and ObjectStorageSaver store the whole
checkpoint (every channel value) at every step; InMemorySaver stores one blob
per changed channel (so a growing message list is still stored whole each step).
``put`` stores checkpoints only: workload 9 calls ``put_writes`` on ``saver`` itself.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

from .peers import Peer, State, tree_size


class LangGraphPeer(Peer):
    def __init__(self, saver: Any) -> None:
        self.saver = saver
        self.heads: dict[str, tuple[Any, State]] = {}

    def put(self, thread: str, step: int, state: State) -> None:
        from langgraph.checkpoint.base import create_checkpoint, empty_checkpoint

        head = self.heads.get(thread)
        base, prev = head if head else (empty_checkpoint(), {})
        changed = [k for k, v in state.items() if k not in prev or prev[k] != v]
        versions = base["channel_versions"]
        new_versions = {k: self.saver.get_next_version(versions.get(k), None) for k in changed}
        cp = create_checkpoint(base, None, step)
        cp["channel_values"] = dict(state)
        cp["channel_versions"] = {**versions, **new_versions}
        cp["versions_seen"] = {"agent": dict(cp["channel_versions"])}
        cp["updated_channels"] = changed
        configurable: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ""}
        if head:
            configurable["checkpoint_id"] = base["id"]
        metadata = {"source": "loop", "step": step, "parents": {}}
        self.saver.put({"configurable": configurable}, cp, metadata, new_versions)
        self.heads[thread] = (cp, state)

    def get_latest(self, thread: str) -> State | None:
        tup = self.saver.get_tuple({"configurable": {"thread_id": thread, "checkpoint_ns": ""}})
        return dict(tup.checkpoint["channel_values"]) if tup else None


class InMemoryPeer(LangGraphPeer):
    name = "LangGraph InMemorySaver"
    durability = "memory"

    def __init__(self, root: Path) -> None:
        from langgraph.checkpoint.memory import InMemorySaver

        super().__init__(InMemorySaver())

    def size_on_disk(self) -> int:
        s = self.saver
        total = sum(len(b) for _t, b in s.blobs.values())
        for namespaces in s.storage.values():
            for cps in namespaces.values():
                for (_t1, cp), (_t2, meta), _parent in cps.values():
                    total += len(cp) + len(meta)
        return total


class SqlitePeer(LangGraphPeer):
    """SqliteSaver on a file: WAL journal, Python's default synchronous=FULL,
    so each put's commit fsyncs the WAL."""

    name = "LangGraph SqliteSaver"
    durability = "power"

    def __init__(self, root: Path) -> None:
        from langgraph.checkpoint.sqlite import SqliteSaver

        root.mkdir(parents=True, exist_ok=True)
        self.root = root
        self.conn = sqlite3.connect(root / "checkpoints.sqlite", check_same_thread=False)
        super().__init__(SqliteSaver(self.conn))
        self.saver.setup()
        sync = self.conn.execute("PRAGMA synchronous").fetchone()[0]
        mode = self.conn.execute("PRAGMA journal_mode").fetchone()[0]
        if sync < 2:  # NORMAL in WAL mode does not fsync at commit
            self.durability = "process"
        self.pragmas = f"journal_mode={mode}, synchronous={sync}"

    def size_on_disk(self) -> int:
        return tree_size(self.root)

    def close(self) -> None:
        self.conn.close()


class ObjectStoragePeer(LangGraphPeer):
    """langgraph-checkpoint-objectstorage on a local directory (``file://``).

    fsspec's local ``pipe_file`` writes the object in place (no temp file, no
    fsync), so a put is neither durable against power loss nor atomic."""

    name = "LangGraph ObjectStorageSaver"
    durability = "process"

    def __init__(self, root: Path) -> None:
        from langgraph_checkpoint_objectstorage import ObjectStorageSaver

        root.mkdir(parents=True, exist_ok=True)
        self.root = root
        super().__init__(ObjectStorageSaver.from_conn_string(f"file://{root}"))

    def size_on_disk(self) -> int:
        return tree_size(self.root)
