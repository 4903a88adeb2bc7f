"""Reading a checkpoint's state: a long value is read on the caller's thread, every byte verified.

A value's chunks are small (chunking.SMALL): each is read, decompressed and hashed by the thread that
asked for the state, without a trip through the store's pool.
"""

from __future__ import annotations

import threading
from pathlib import Path

import agentfs
from agentfs.format import refs

MESSAGES = [{"role": "user" if i % 2 else "assistant", "content": f"message {i} " + "lorem ipsum " * 40} for i in range(400)]


def io_threads() -> set[threading.Thread]:
    return {thread for thread in threading.enumerate() if thread.name.startswith("agentfs-io")}


def test_a_long_value_is_read_without_starting_the_pool(tmp_path: Path) -> None:
    root = tmp_path / ".agentfs"
    with agentfs.open(root) as store:
        cp = store.run("r").commit({"messages": MESSAGES})
        assert cp.manifest.state["messages"][2][0] == refs.TREE, "the value is a chunk tree"
    before = io_threads()
    with agentfs.open(root) as store:
        assert store.run("r").latest().state == {"messages": MESSAGES}  # type: ignore[union-attr]
        assert io_threads() == before, "reading the value started the store's pool"
