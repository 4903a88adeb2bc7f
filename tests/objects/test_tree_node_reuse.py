"""The nodes a commit takes from a tree it extends (BlobWriter.put_after's `base`) are the nodes a fresh grouping makes.

A growing list's commit groups its chunks under tree nodes again; the nodes over the chunks it kept from the
parent's tree are taken from that tree's levels instead of being encoded and hashed again. Any other ref than a
fresh grouping's would be another blob id for the same bytes (and so a different store from a plaintext or a
fresh one), so every case here compares the two, on chunk lists made to reach the rules' corners: runs of equal
sizes (a child as big as the one before never ends a node), every chunk kept, none kept, and trees of 1 to 4 levels.
"""

from __future__ import annotations

import random
from pathlib import Path

import agentfs
from agentfs.engine.object_cache import NodeSpan
from agentfs.engine.object_store import ObjectWriter
from agentfs.format.refs import TreeChild
from agentfs.objects.blobs import BlobWriter


def _chunks(rng: random.Random, count: int) -> list[TreeChild]:
    sizes = [1024, 4096, 16384] if rng.random() < 0.3 else None  # few sizes: many equal neighbours
    return [TreeChild(rng.randbytes(32), rng.choice(sizes) if sizes else rng.randint(1024, 16384)) for _ in range(count)]


def test_nodes_taken_from_a_tree_that_begins_alike_are_a_fresh_grouping_s(tmp_path: Path) -> None:
    """Planted: taking the base level's last node as well (it ended with its level, not by node_ends) fails when every
    chunk is kept."""
    rng = random.Random(11)
    with agentfs.open(tmp_path) as store:
        writer = ObjectWriter(store.engine.db, store.engine.pool)
        blobs = BlobWriter(lambda: writer, {})
        depths = set()
        for _case in range(400):
            base = _chunks(rng, rng.choice([2, 9, 40, 300, 2500]))
            levels: list[list[NodeSpan]] = []
            blobs._root(base, levels)
            kept = rng.choice([len(base), 0, rng.randint(0, len(base))])
            chunks = base[:kept] + _chunks(rng, rng.choice([0, 1, 5, 200]))
            if len(chunks) < 2:
                continue
            fresh = blobs._root(chunks)
            taken: list[list[NodeSpan]] = []
            assert blobs._root(chunks, taken, levels, kept) == fresh, f"case {_case}: {len(base)} chunks, {kept} kept, {len(chunks)} now"
            assert [span.children for span in taken[0]] == _fresh_spans(blobs, chunks)
            depths.add(fresh.depth)  # type: ignore[union-attr]
        store.engine.db.append(writer.finish(), True)
    assert depths >= {1, 2, 3, 4}


def _fresh_spans(blobs: BlobWriter, chunks: list[TreeChild]) -> list[int]:
    levels: list[list[NodeSpan]] = []
    blobs._root(chunks, levels)
    return [span.children for span in levels[0]]
