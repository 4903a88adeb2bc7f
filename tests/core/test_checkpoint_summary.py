"""What a front-end asks a Checkpoint instead of decoding its manifest's refs (the CLI's show and diff, the UI,
the LangGraph saver's cache of small values): sizes, keys and "same content", from the manifest, nothing read."""

from __future__ import annotations

from pathlib import Path

import agentfs
from agentfs.format.refs import INLINE_MAX, PACK_MAX
from agentfs.serialization import encode_value


def test_sizes_keys_and_kind_come_from_the_manifest(tmp_path: Path) -> None:
    with agentfs.open(tmp_path) as store:
        state = {"tiny": 1, "text": "t" * 1000, "big": "b" * (PACK_MAX * 4)}
        checkpoint = store.run("r").commit(state, artifacts={"a.bin": b"a" * 5000})
        assert checkpoint.state_kind == "map"
        assert checkpoint.value_keys() == list(state)
        assert checkpoint.has_value("text") and not checkpoint.has_value("missing")
        sizes = checkpoint.value_sizes()
        assert sizes == {key: len(encode_value(value)) for key, value in state.items()}
        assert checkpoint.stored_size == sum(sizes.values()) + 5000
        whole = store.run("v").commit([1, 2, 3])
        assert whole.state_kind == "value" and whole.value_keys() == [""] and whole.has_value("")


def test_value_in_entry_is_true_for_inline_and_packed_values_only(tmp_path: Path) -> None:
    with agentfs.open(tmp_path) as store:
        checkpoint = store.run("r").commit({"inline": 1, "packed": "p" * (INLINE_MAX * 4), "chunked": "c" * (PACK_MAX * 4)})
        assert checkpoint.value_in_entry("inline") and checkpoint.value_in_entry("packed")
        assert not checkpoint.value_in_entry("chunked")


def test_same_value_and_same_content_compare_what_is_stored_not_where(tmp_path: Path) -> None:
    with agentfs.open(tmp_path) as store:
        keep, big = "k" * 300, b"x" * (PACK_MAX * 8)
        a = store.run("r").commit({"keep": keep, "big": big, "changed": 1}, artifacts={"same.bin": big, "small.txt": b"s" * 300})
        b = store.run("r").commit({"keep": keep, "big": big, "changed": 2}, artifacts={"same.bin": big, "small.txt": b"t" * 300})
        assert a.manifest.state["keep"].blob != b.manifest.state["keep"].blob  # b borrows the packed object from a's entry
        assert a.same_value("keep", b) and a.same_value("big", b) and not a.same_value("changed", b)
        assert a.artifacts["same.bin"].same_content(b.artifacts["same.bin"])
        assert not a.artifacts["small.txt"].same_content(b.artifacts["small.txt"])
        assert not store.run("s").commit({"keep": keep.encode()}).same_value("keep", a)  # same length, another encoding
