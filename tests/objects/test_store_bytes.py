"""The benchmarks' split of a store's bytes (benchmarks/store_bytes.py): every byte of the files counted once, and
what a growing value's commits rewrote told from what its head holds."""

from __future__ import annotations

from pathlib import Path

import agentfs
from benchmarks.data import conversation
from benchmarks.store_bytes import store_bytes


def _parts_sum(split: tuple[int, ...]) -> int:
    content_chunks, rewritten_chunks, content_nodes, rewritten_nodes, entries, _packed, other, _total = split
    return content_chunks + rewritten_chunks + content_nodes + rewritten_nodes + entries + other


def test_a_value_committed_once_rewrote_nothing(tmp_path: Path) -> None:
    states = list(conversation(60))
    with agentfs.open(tmp_path / "s", durability="process") as store:
        store.run("r").commit(states[-1])
    split = store_bytes(tmp_path / "s")
    assert _parts_sum(split) == split.total
    assert split.content_chunks > 0 and split.content_nodes > 0
    assert split.rewritten_chunks == 0 and split.rewritten_nodes == 0


def test_a_growing_value_s_rewritten_tail_is_counted_apart_from_its_content(tmp_path: Path) -> None:
    states = list(conversation(60))
    with agentfs.open(tmp_path / "once", durability="process") as store:
        store.run("r").commit(states[-1])
    with agentfs.open(tmp_path / "grown", durability="process") as store:
        run = store.run("r")
        for state in states:
            run.commit(state)
    once, grown = store_bytes(tmp_path / "once"), store_bytes(tmp_path / "grown")
    assert _parts_sum(grown) == grown.total
    # the head holds what one commit of the last state stores: the rest of the object bytes are rewrites
    assert (grown.content_chunks, grown.content_nodes) == (once.content_chunks, once.content_nodes)
    assert grown.rewritten_chunks > 0 and grown.rewritten_nodes > 0
    assert grown.packed > 0  # the list's first steps, 16 KiB or less, were packed into their entries
    assert "rewritten chunks" in grown.per(len(states), "step")
