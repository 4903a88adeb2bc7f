"""Schema versions: old checkpoints load migrated, newer ones are refused, nothing is rewritten."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgpack
import pytest

import agentfs
from agentfs.format.entries import decode_entry_at
from tests.helpers import raw
from tests.helpers.tree import snapshot

RUN = "agent/main"


def v1_to_v2(state: dict[str, Any]) -> dict[str, Any]:
    """v2 renamed "msgs" to "messages"."""
    state = dict(state)
    state["messages"] = state.pop("msgs")
    return state


def v2_to_v3(state: dict[str, Any]) -> dict[str, Any]:
    """v3 made every message a dict with a role."""
    return {**state, "messages": [m if isinstance(m, dict) else {"role": "user", "text": m} for m in state["messages"]]}


SCHEMA_V3 = agentfs.Schema(version=3, migrations={1: v1_to_v2, 2: v2_to_v3})


def _manifest_field(store: agentfs.Store, cp: agentfs.Checkpoint, field: str) -> Any:
    entry = decode_entry_at(raw.record_bytes(store, cp.run, raw.LOG_RECORDS, cp.id), cp.run, cp.id, "test")
    return msgpack.unpackb(entry.manifest_bytes, raw=False)[-1].get(field)  # format 2: optional fields last


def test_versions_1_2_3_all_load_as_3_and_loading_rewrites_nothing(store: agentfs.Store) -> None:
    unversioned = store.run(RUN).commit({"msgs": ["hi"], "step": 0})
    v1 = store.run(RUN, schema=agentfs.Schema(version=1)).commit({"msgs": ["hi", "there"], "step": 1})
    v2 = store.run(RUN, schema=agentfs.Schema(version=2, migrations={1: v1_to_v2})).commit({"messages": ["a", "b"], "step": 2})
    v3 = store.run(RUN, schema=SCHEMA_V3).commit({"messages": [{"role": "tool", "text": "t"}], "step": 3})
    assert [_manifest_field(store, cp, "schema") for cp in (unversioned, v1, v2, v3)] == [None, 1, 2, 3]

    before = snapshot(store.root)
    run = store.run(RUN, schema=SCHEMA_V3)
    loaded = {cp.id: cp for cp in run.history()}
    assert loaded[unversioned.id].state == {"messages": [{"role": "user", "text": "hi"}], "step": 0}
    assert loaded[v1.id].state == {"messages": [{"role": "user", "text": "hi"}, {"role": "user", "text": "there"}], "step": 1}
    assert loaded[v2.id].state == {"messages": [{"role": "user", "text": "a"}, {"role": "user", "text": "b"}], "step": 2}
    assert loaded[v3.id].state == {"messages": [{"role": "tool", "text": "t"}], "step": 3}
    assert loaded[v1.id].value("messages")[1] == {"role": "user", "text": "there"}
    assert loaded[v1.id].stored_state == {"msgs": ["hi", "there"], "step": 1}
    assert [loaded[cp.id].schema_version for cp in (unversioned, v1, v2, v3)] == [None, 1, 2, 3]
    assert snapshot(store.root) == before, "loading migrated checkpoints changed stored bytes"
    assert store.verify().ok


def test_a_newer_version_is_refused_naming_both_versions(store: agentfs.Store) -> None:
    newer = store.run(RUN, schema=agentfs.Schema(version=4, migrations={})).commit({"messages": [], "v": 4})
    cp = store.run(RUN, schema=SCHEMA_V3).get(newer.id)
    assert cp.metadata == {}  # everything but the state stays readable
    with pytest.raises(agentfs.SchemaError, match=r"schema version 4, newer than this code's version 3") as caught:
        _ = cp.state
    assert newer.id in str(caught.value)
    with pytest.raises(ValueError):  # also a ValueError
        _ = store.run(RUN, schema=SCHEMA_V3).latest().value("messages")  # type: ignore[union-attr]


def test_a_missing_migration_and_a_failing_migration_are_named(store: agentfs.Store) -> None:
    store.run(RUN, schema=agentfs.Schema(version=1)).commit({"msgs": []})
    gap = store.run(RUN, schema=agentfs.Schema(version=3, migrations={2: v2_to_v3}))
    with pytest.raises(agentfs.SchemaError, match="no migration from version 1 to 2"):
        _ = gap.latest().state  # type: ignore[union-attr]
    broken = store.run(RUN, schema=agentfs.Schema(version=3, migrations={1: v1_to_v2, 2: lambda s: s["nope"]}))
    with pytest.raises(agentfs.SchemaError, match=r"migration from schema version 2 to 3 failed: KeyError\('nope'\)"):
        _ = broken.latest().state  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("version", "migrations", "message"),
    [
        (0, {}, "version must be an int >= 1"),
        ("2", {}, "version must be an int >= 1"),
        (3, {3: v1_to_v2}, "from 1 to 2"),
        (2, {1: "x"}, "not a callable"),
    ],
)
def test_bad_schemas_are_refused(version: Any, migrations: Any, message: str) -> None:
    with pytest.raises(agentfs.SchemaError, match=message):
        agentfs.Schema(version=version, migrations=migrations)


def test_fork_keeps_the_schema_version_and_a_run_without_schema_sees_stored_state(store: agentfs.Store) -> None:
    cp = store.run(RUN, schema=agentfs.Schema(version=1)).commit({"msgs": ["x"]})
    forked = store.run(RUN, schema=SCHEMA_V3).fork(cp.id, "agent/fork")
    head = store.run("agent/fork", schema=SCHEMA_V3).latest()
    assert head is not None and head.schema_version == 1 and head.state == {"messages": [{"role": "user", "text": "x"}]}
    assert forked.latest().state == {"msgs": ["x"]}  # type: ignore[union-attr]  # no schema: exactly as stored


def test_a_tampered_schema_field_is_a_format_error(tmp_path: Path) -> None:
    from agentfs.format.manifest import Manifest

    with agentfs.open(tmp_path / "s") as store:
        cp = store.run(RUN, schema=agentfs.Schema(version=2, migrations={1: v1_to_v2})).commit({"messages": []})
        record = msgpack.unpackb(cp.manifest.to_bytes(), raw=False)
        record[-1]["schema"] = "2"  # format 2: optional fields last
        with pytest.raises(agentfs.FormatError, match="'schema' is malformed"):
            Manifest.from_bytes(msgpack.packb(record, use_bin_type=True), cp.run, cp.id, "tampered")
