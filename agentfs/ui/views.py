"""What the run, checkpoint, diff and journal pages show, read from the store; the templates only lay it out."""

from __future__ import annotations

import datetime as dt
import difflib
import json
from dataclasses import dataclass, field
from typing import Any

import agentfs

from ..core.value_changes import value_changes
from ..format.refs import ref_size
from .lineage import Heads
from .listing import AUDIT_PREFIX
from .previews import ArtifactPreview, Node, jsonable, preview_artifact, tree

RUN_PAGE = 100
LANE = 16  # pixels between two lanes of the graph
ROW = 30  # pixels per checkpoint row
AUDIT_SHOWN = 200
PREVIEW = 160  # characters of a value shown in a list
LAZY_STATE_BYTES = 4096  # a top-level state value stored in more bytes loads when opened
TEXT_DIFF_BYTES = 256 << 10


def preview(value: Any) -> str:
    text = json.dumps(jsonable(value), ensure_ascii=False, default=repr)
    return text if len(text) <= PREVIEW else text[: PREVIEW - 3] + "..."


@dataclass
class GraphRow:
    checkpoint: agentfs.Checkpoint
    column: int
    lanes: int  # lanes drawn through this row
    joins: list[int]  # lanes that end here (lines that branched from this checkpoint)
    head: bool
    forks: list[str]  # runs forked from this checkpoint
    notes: list[dict[str, Any]]


@dataclass
class RunView:
    name: str
    total: int
    page: int
    more: bool
    rows: list[GraphRow]
    heads: list[str]
    width: int
    forked_from: tuple[str, str] | None
    audit: list[dict[str, Any]]


def audit_trail(store: agentfs.Store, run: str) -> list[dict[str, Any]]:
    """What people did to `run` through `agentfs ui --allow-writes`, newest first."""
    trail = store.run(AUDIT_PREFIX + run)
    return [{**commit.state, "created": commit.created} for commit in trail.history(AUDIT_SHOWN) if isinstance(commit.state, dict)]


def run_view(store: agentfs.Store, heads: Heads, name: str, page: int) -> RunView:
    """One page of the run: its cost is the page's, not the run's history (Run.id_slice, Heads kept per run)."""
    run = store.run(name)
    window = run.id_slice(-(page + 1) * RUN_PAGE, -page * RUN_PAGE or None)
    if not window.total:
        raise agentfs.NotFound(f"run {name!r} not found: it has no checkpoints")
    run_heads = heads.of(name)
    shown = [run.get(checkpoint_id) for checkpoint_id in reversed(window.ids)]
    forks: dict[str, list[str]] = {}
    for other in sorted(store.run(name).forks()):
        source = _forked_from(store.run(other))
        if source is not None and source[0] == name:
            forks.setdefault(source[1], []).append(other)
    audit = audit_trail(store, name)
    notes: dict[str, list[dict[str, Any]]] = {}
    for action in audit:
        if action.get("action") == "note":
            notes.setdefault(str(action.get("checkpoint")), []).append(action)
    rows = _graph(shown, set(run_heads), forks, notes)
    width = max((row.lanes for row in rows), default=1) * LANE + LANE
    return RunView(name, window.total, page, window.start > 0, rows, run_heads, width, _forked_from(run), audit)


def _forked_from(run: agentfs.Run) -> tuple[str, str] | None:
    """(run, checkpoint) the run was forked from, named by its first checkpoint; None if it was not."""
    first = run.id_slice(0, 1).ids
    return run.get(first[0]).forked_from if first else None


def _graph(
    history: list[agentfs.Checkpoint], heads: set[str], forks: dict[str, list[str]], notes: dict[str, list[dict[str, Any]]]
) -> list[GraphRow]:
    """Lanes as `agentfs log --graph` draws them: a line per head, joining the line it branched from at its parent."""
    present = {checkpoint.id for checkpoint in history}
    lanes: list[str] = []
    rows = []
    for checkpoint in history:
        waiting = [lane for lane, expected in enumerate(lanes) if expected == checkpoint.id]
        if not waiting:
            lanes.append(checkpoint.id)
            waiting = [len(lanes) - 1]
        width = len(lanes)
        column = waiting[0]
        for joined in reversed(waiting[1:]):
            del lanes[joined]
        rows.append(
            GraphRow(
                checkpoint, column, width, waiting[1:], checkpoint.id in heads, forks.get(checkpoint.id, []), notes.get(checkpoint.id, [])
            )
        )
        if checkpoint.parent is None or checkpoint.parent not in present:
            del lanes[column]
        else:
            lanes[column] = checkpoint.parent
    return rows


@dataclass
class StateKey:
    name: str
    stored_bytes: int
    node: Node | None  # None: loaded when opened


@dataclass
class CheckpointView:
    checkpoint: agentfs.Checkpoint
    metadata: Node
    state: list[StateKey]
    artifacts: list[ArtifactPreview]
    is_head: bool
    state_json: str | None  # for the edit form; None when too large to edit here


EDITABLE_BYTES = 1 << 20


def checkpoint_view(store: agentfs.Store, run: str, checkpoint_id: str) -> CheckpointView:
    checkpoint = store.run(run).get(checkpoint_id)
    keys = []
    total = 0
    for key, (_fmt, _count, ref) in sorted(checkpoint.manifest.state.items()):
        size = ref_size(ref)
        total += size
        node = None if size > LAZY_STATE_BYTES else tree(checkpoint.value(key), key or "(state)", [key], 0)
        keys.append(StateKey(key, size, node))
    artifacts = [preview_artifact(checkpoint.artifacts[name]) for name in sorted(checkpoint.artifacts)]
    state_json = json.dumps(jsonable(checkpoint.state), indent=1, ensure_ascii=False, default=repr) if total <= EDITABLE_BYTES else None
    is_head = checkpoint.id == store.run(run).head_id()
    return CheckpointView(checkpoint, tree(checkpoint.metadata, "metadata", [], 0), keys, artifacts, is_head, state_json)


@dataclass
class KeyChange:
    name: str
    change: str  # added, removed, changed
    lines: list[str] = field(default_factory=list)


@dataclass
class ArtifactChange:
    name: str
    change: str
    text_diff: list[str] = field(default_factory=list)


@dataclass
class DiffView:
    a: agentfs.Checkpoint
    b: agentfs.Checkpoint
    keys: list[KeyChange]
    artifacts: list[ArtifactChange]
    unchanged_keys: int


def diff_view(store: agentfs.Store, a: agentfs.Checkpoint, b: agentfs.Checkpoint) -> DiffView:
    """Keys whose stored object differs are decoded and compared; equal refs are equal values without reading them."""
    old, new = a.manifest.state, b.manifest.state
    keys = [KeyChange(key, "added", [f"+ {preview(b.value(key))}"]) for key in sorted(new.keys() - old.keys())]
    keys += [KeyChange(key, "removed", [f"- {preview(a.value(key))}"]) for key in sorted(old.keys() - new.keys())]
    unchanged = 0
    for key in sorted(old.keys() & new.keys()):
        if old[key][2] == new[key][2]:
            unchanged += 1
            continue
        keys.append(KeyChange(key, "changed", _changes(a.value(key), b.value(key))))
    artifacts = []
    for name in sorted(a.artifacts.keys() | b.artifacts.keys()):
        before, after = a.manifest.artifacts.get(name), b.manifest.artifacts.get(name)
        if before == after:
            continue
        change = "added" if before is None else "removed" if after is None else "changed"
        artifacts.append(ArtifactChange(name, change, _text_diff(a, b, name) if change == "changed" else []))
    return DiffView(a, b, keys, artifacts, unchanged)


def _text(checkpoint: agentfs.Checkpoint, name: str) -> list[str] | None:
    with checkpoint.artifacts[name].open() as stream:
        data = stream.read(TEXT_DIFF_BYTES)
    try:
        return data.decode("utf-8").splitlines()
    except UnicodeDecodeError:
        return None


def _text_diff(a: agentfs.Checkpoint, b: agentfs.Checkpoint, name: str) -> list[str]:
    before, after = _text(a, name), _text(b, name)
    if before is None or after is None:
        return []
    return list(difflib.unified_diff(before, after, "a/" + name, "b/" + name, lineterm="", n=2))


def _changes(a: Any, b: Any) -> list[str]:
    """`- old` / `+ new` lines: per item after the common prefix of two lists, per key for two dicts."""
    return value_changes(a, b, preview, lambda key: f"[{key!r}]", lambda kept: f"{kept} items")


@dataclass
class CallRow:
    key: str
    name: str
    status: str
    started: dt.datetime
    finished: dt.datetime | None
    seconds: float | None
    args: str
    result: str
    attempts: int


def journal_view(store: agentfs.Store, run: str) -> list[CallRow]:
    rows = []
    for call in store.run(run).journal.calls():
        args = result = ""
        try:
            args = preview(call.args)
            result = preview(call.result) if call.status == "ok" else preview(call.error) if call.error else ""
        except agentfs.AgentFSError as exc:
            result = f"<unreadable: {exc}>"
        seconds = (call.finished - call.started).total_seconds() if call.finished else None
        rows.append(CallRow(call.key, call.name, call.status, call.started, call.finished, seconds, args, result, call.attempts))
    return rows
