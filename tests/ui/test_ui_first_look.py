"""The ui's first look at a long run takes its heads from the engine (Run.heads: the sealed segments' lineage records,
tests/engine/test_lineage_records.py), then follows new commits by their manifests: a divergence read from the records
shows, and a commit on one of its heads moves that head."""

from __future__ import annotations

from pathlib import Path

import agentfs
from agentfs.ui.lineage import FIRST_LOOK_READS, Heads
from tests.engine.test_lineage_records import diverge, manifest_heads, session


def test_a_long_runs_divergence_from_the_records_then_a_commit_on_a_head(tmp_path: Path) -> None:
    with agentfs.open(tmp_path, durability="process") as store:
        ids = session(store, FIRST_LOOK_READS + 4)
        diverge(store, "main", ids[3])  # the newest: the next commit goes on it
        mine = store.run("main").commit({"step": 99}).id
    with agentfs.open(tmp_path, durability="process") as store:
        assert store.engine.index.lineages("main")  # what the first look reads
        heads = Heads(store)
        assert heads.of("main") == manifest_heads(store, "main") == [ids[-1], mine]
        newer = store.run("main").commit({"step": 100}).id  # on `mine`
        assert heads.of("main") == manifest_heads(store, "main") == [ids[-1], newer]
