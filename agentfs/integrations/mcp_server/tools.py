"""The MCP tools: each an arguments model (its JSON schema is the tool's input schema), a blocking
handler over an `agentfs.Store` that returns one JSON document, and its annotations.

Checkpoints are named as on the command line: "RUN" (the run's head) or "RUN@ID". Every write
appends a checkpoint (nothing is overwritten or removed), so write tools are marked not destructive.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import dataclasses
from collections.abc import Callable
from typing import IO, Any, Literal

from mcp import types
from pydantic import BaseModel, ConfigDict, Field

import agentfs

from .render import FULL, SHORT, call_summary, checkpoint_summary, jsonable, state_summary, value_summary

READ_BLOCK = 1 << 20
MAX_READ = 4 << 20  # bytes of an artifact one read_artifact call returns at most
CHECKPOINT = "a checkpoint: 'RUN' for the run's newest checkpoint, or 'RUN@ID'"

Encoding = Literal["utf-8", "base64"]


class Arguments(BaseModel):
    model_config = ConfigDict(extra="forbid")


class NoArguments(Arguments):
    pass


class RunArguments(Arguments):
    run: str = Field(description="the run's name, e.g. 'research/task-42'")
    limit: int = Field(default=20, ge=1, le=1000, description="how many to list at most, newest first")


class CheckpointArguments(Arguments):
    checkpoint: str = Field(description=CHECKPOINT)


class DiffArguments(Arguments):
    a: str = Field(description=f"the old side, {CHECKPOINT}")
    b: str = Field(description=f"the new side, {CHECKPOINT}")


class StateArguments(Arguments):
    checkpoint: str = Field(description=CHECKPOINT)
    key: str | None = Field(default=None, description="one top-level state key, returned in full; omit for every key in brief")


class ArtifactContent(Arguments):
    content: str = Field(description="the artifact's bytes: text, or base64 with encoding='base64'")
    encoding: Encoding = Field(default="utf-8", description="'utf-8' stores the text's UTF-8 bytes; 'base64' decodes content first")


class CommitArguments(Arguments):
    run: str = Field(description="the run to append to (created by its first commit)")
    state: Any = Field(description="the new state: any JSON value; an object is stored key by key")
    metadata: dict[str, Any] | None = Field(default=None, description="small JSON object stored beside the state")
    artifacts: dict[str, ArtifactContent] | None = Field(default=None, description="files to store with the checkpoint, by name")
    keep_artifacts: bool = Field(
        default=True, description="carry the head's artifacts forward (those not replaced by `artifacts`); false drops them"
    )
    parent: str | None = Field(
        default=None, description="expected head id: the commit fails with a conflict if the run's head has moved since"
    )


class ForkArguments(Arguments):
    checkpoint: str = Field(description=f"where the new run starts, {CHECKPOINT}")
    new_run: str = Field(description="the new run's name; it must not exist yet")


class ReadArtifactArguments(Arguments):
    checkpoint: str = Field(description=CHECKPOINT)
    name: str = Field(description="the artifact's name")
    offset: int = Field(default=0, ge=0, description="first byte to return")
    length: int = Field(default=1 << 20, ge=1, le=MAX_READ, description=f"bytes to return at most (max {MAX_READ})")


class WriteArtifactArguments(ArtifactContent):
    run: str = Field(description="the run: a new checkpoint is committed with its head's state, its artifacts and this one")
    name: str = Field(description="the artifact's name ('/'-separated segments of A-Z a-z 0-9 . _ -)")
    metadata: dict[str, Any] | None = Field(default=None, description="metadata of the new checkpoint (default: the head's)")


@dataclasses.dataclass(frozen=True)
class ToolSpec:
    name: str
    description: str
    arguments: type[Arguments]
    handler: Callable[[agentfs.Store, Any], dict[str, Any]]
    read_only: bool

    def describe(self) -> types.Tool:
        return types.Tool(
            name=self.name,
            description=self.description,
            input_schema=self.arguments.model_json_schema(),
            annotations=types.ToolAnnotations(
                read_only_hint=self.read_only,
                destructive_hint=False,  # every write appends a checkpoint; nothing is overwritten or removed
                idempotent_hint=self.read_only,
                open_world_hint=False,
            ),
        )


def resolve(store: agentfs.Store, target: str) -> agentfs.Checkpoint:
    """'RUN' (its head) or 'RUN@ID'."""
    name, at, checkpoint_id = target.partition("@")
    run = store.run(name)
    if at:
        return run.get(checkpoint_id)
    return _head(run)


def _head(run: agentfs.Run) -> agentfs.Checkpoint:
    head = run.latest()
    if head is None:
        raise agentfs.NotFound(f"run {run.name!r} not found: it has no checkpoints")
    return head


def list_runs(store: agentfs.Store, _args: NoArguments) -> dict[str, Any]:
    runs = []
    for name in store.runs():
        run = store.run(name)
        ids = run.ids()
        head = run.get(ids[-1]) if ids else None
        runs.append(
            {
                "name": name,
                "checkpoints": len(ids),
                "head": head.id if head else None,
                "head_created": head.created.isoformat(timespec="microseconds") if head else None,
            }
        )
    return {"runs": runs}


def list_checkpoints(store: agentfs.Store, args: RunArguments) -> dict[str, Any]:
    run = store.run(args.run)
    history = run.history(limit=args.limit)
    if not history:
        raise agentfs.NotFound(f"run {run.name!r} not found: it has no checkpoints")
    return {
        "run": run.name,
        "total": len(run.ids()),
        "checkpoints": [
            {
                "id": cp.id,
                "parent": cp.parent,
                "created": cp.created.isoformat(timespec="microseconds"),
                "metadata": jsonable(cp.metadata, SHORT),
            }
            for cp in history
        ],
    }


def show_checkpoint(store: agentfs.Store, args: CheckpointArguments) -> dict[str, Any]:
    return checkpoint_summary(resolve(store, args.checkpoint))


def read_state(store: agentfs.Store, args: StateArguments) -> dict[str, Any]:
    checkpoint = resolve(store, args.checkpoint)
    if args.key is None:
        return state_summary(checkpoint)
    value = checkpoint.value(args.key)
    return {"ref": str(checkpoint), "key": args.key, "value": jsonable(value, FULL)}


def diff_checkpoints(store: agentfs.Store, args: DiffArguments) -> dict[str, Any]:
    a, b = resolve(store, args.a), resolve(store, args.b)
    state_a, state_b = _as_keys(a.state), _as_keys(b.state)
    changed = sorted(key for key in state_a.keys() & state_b.keys() if not _same(state_a[key], state_b[key]))
    state = {
        "added": {key: value_summary(state_b[key]) for key in sorted(state_b.keys() - state_a.keys())},
        "removed": {key: value_summary(state_a[key]) for key in sorted(state_a.keys() - state_b.keys())},
        "changed": {key: {"a": value_summary(state_a[key]), "b": value_summary(state_b[key])} for key in changed},
    }
    names_a, names_b = set(a.artifacts), set(b.artifacts)
    artifacts = {
        "added": {name: b.artifacts[name].size for name in sorted(names_b - names_a)},
        "removed": {name: a.artifacts[name].size for name in sorted(names_a - names_b)},
        "changed": {
            name: {"size_a": a.artifacts[name].size, "size_b": b.artifacts[name].size}
            for name in sorted(names_a & names_b)
            if not _same_bytes(a.artifacts[name], b.artifacts[name])
        },
    }
    same = not any(section[kind] for section in (state, artifacts) for kind in ("added", "removed", "changed"))
    return {"a": str(a), "b": str(b), "same": same, "state": state, "artifacts": artifacts}


def _as_keys(state: Any) -> dict[str, Any]:
    """A mapping state by its keys; any other state as the one key "" (as agentfs stores it)."""
    if isinstance(state, dict) and all(isinstance(key, str) for key in state):
        return state
    return {"": state}


def _same(a: Any, b: Any) -> bool:
    try:
        return type(a) is type(b) and bool(a == b)
    except (ValueError, TypeError):  # numpy arrays (also nested in a container) have no single truth value
        return jsonable(a) == jsonable(b)


def _same_bytes(a: agentfs.Artifact, b: agentfs.Artifact) -> bool:
    if a.size != b.size:
        return False
    with a.open() as left, b.open() as right:
        while block := left.read(READ_BLOCK):
            if block != right.read(len(block)):
                return False
    return True


def commit(store: agentfs.Store, args: CommitArguments) -> dict[str, Any]:
    head = store.run(args.run).latest()
    run = _versioned(store, args.run, head)
    new = {name: _decode(name, item.content, item.encoding) for name, item in (args.artifacts or {}).items()}
    parent = args.parent
    with contextlib.ExitStack() as streams:
        sources: dict[str, bytes | IO[bytes]] = {}
        if head is not None and args.keep_artifacts:
            # hazard: carried artifacts are read from this head, so the commit must land on it; a head that moved
            # meanwhile makes it a Conflict rather than drop the artifacts of the commit that moved it
            parent = parent or head.id
            if parent != head.id:
                raise agentfs.Conflict(f"run {run.name!r}: expected head {parent}, found {head.id}")
            sources.update({name: streams.enter_context(art.open()) for name, art in head.artifacts.items() if name not in new})
        sources.update(new)
        options: dict[str, Any] = {} if parent is None else {"parent": parent}
        checkpoint = run.commit(args.state, artifacts=sources, metadata=args.metadata, **options)
    return checkpoint_summary(checkpoint)


def _versioned(store: agentfs.Store, name: str, head: agentfs.Checkpoint | None) -> agentfs.Run:
    """The run, committing with its head's schema version: the client reads and writes states as stored.

    hazard: a commit without a schema counts as version 1, so the agent's code would run its migrations
    over a state that is already at its version.
    """
    if head is None or head.schema_version is None:
        return store.run(name)
    return store.run(name, schema=agentfs.Schema(version=head.schema_version))


def fork(store: agentfs.Store, args: ForkArguments) -> dict[str, Any]:
    source = resolve(store, args.checkpoint)
    forked = store.run(source.run).fork(source.id, args.new_run)
    return checkpoint_summary(_head(forked))


def read_artifact(store: agentfs.Store, args: ReadArtifactArguments) -> dict[str, Any]:
    """The bytes [offset, offset + length): as text when they are valid UTF-8, else as base64."""
    checkpoint = resolve(store, args.checkpoint)
    artifact = checkpoint.artifacts[args.name]
    with artifact.open() as stream:
        skip = args.offset
        while skip and (block := stream.read(min(skip, READ_BLOCK))):
            skip -= len(block)
        data = stream.read(args.length)
    try:
        content, encoding = data.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        content, encoding = base64.b64encode(data).decode("ascii"), "base64"
    return {
        "ref": str(checkpoint),
        "name": args.name,
        "size": artifact.size,
        "offset": args.offset,
        "length": len(data),
        "more": args.offset + len(data) < artifact.size,
        "encoding": encoding,
        "content": content,
    }


def write_artifact(store: agentfs.Store, args: WriteArtifactArguments) -> dict[str, Any]:
    head = _head(store.run(args.run))
    run = _versioned(store, args.run, head)
    data = _decode(args.name, args.content, args.encoding)
    with contextlib.ExitStack() as streams:
        sources: dict[str, bytes | IO[bytes]] = {name: streams.enter_context(art.open()) for name, art in head.artifacts.items()}
        sources[args.name] = data
        metadata = args.metadata if args.metadata is not None else head.metadata
        checkpoint = run.commit(head.state, artifacts=sources, metadata=metadata, parent=head.id)
    return checkpoint_summary(checkpoint)


def _decode(name: str, content: str, encoding: Encoding) -> bytes:
    if encoding == "utf-8":
        return content.encode("utf-8")
    try:
        return base64.b64decode(content, validate=True)
    except binascii.Error as exc:
        raise agentfs.SerializationError(f"artifact {name!r}: content is not valid base64 ({exc})") from None


def list_journal(store: agentfs.Store, args: RunArguments) -> dict[str, Any]:
    run = store.run(args.run)
    journal = run.journal
    calls = journal.calls()
    if not calls and not journal.damaged and run.head_id() is None:
        raise agentfs.NotFound(f"run {run.name!r} not found: it has no journal and no checkpoints")
    return {
        "run": run.name,
        "total": len(calls),
        "calls": [call_summary(call) for call in calls[::-1][: args.limit]],
        "damaged": [{"id": record_id, "error": why} for record_id, why in journal.damaged],
    }


TOOLS: tuple[ToolSpec, ...] = (
    ToolSpec("list_runs", "List the store's runs with their checkpoint count and head.", NoArguments, list_runs, read_only=True),
    ToolSpec(
        "list_checkpoints", "A run's checkpoints, newest first: id, parent, time, metadata.", RunArguments, list_checkpoints, read_only=True
    ),
    ToolSpec(
        "show_checkpoint",
        "One checkpoint: parent, time, metadata, state keys, artifacts with sizes in bytes.",
        CheckpointArguments,
        show_checkpoint,
        read_only=True,
    ),
    ToolSpec(
        "read_state",
        "A checkpoint's state: without `key`, each top-level key's type, JSON length and a truncated preview; "
        "with `key`, that key's full value. Bytes appear as {'$bytes': base64}.",
        StateArguments,
        read_state,
        read_only=True,
    ),
    ToolSpec(
        "diff_checkpoints",
        "State keys and artifacts added, removed or changed from checkpoint a to b, with value previews.",
        DiffArguments,
        diff_checkpoints,
        read_only=True,
    ),
    ToolSpec(
        "read_artifact",
        "Bytes of an artifact (up to `length` from `offset`): as text when they are valid UTF-8, otherwise base64 "
        "(see `encoding`); `more` says whether bytes remain.",
        ReadArtifactArguments,
        read_artifact,
        read_only=True,
    ),
    ToolSpec(
        "list_journal",
        "A run's journaled tool calls, newest first (latest attempt per key): status (ok, error, in_flight), times, "
        "args and result previews.",
        RunArguments,
        list_journal,
        read_only=True,
    ),
    ToolSpec(
        "commit",
        "Append a checkpoint to a run with a new state (and artifacts); by default the head's artifacts are kept. "
        "The state is taken to be in the head's schema version (states are read and written as stored).",
        CommitArguments,
        commit,
        read_only=False,
    ),
    ToolSpec("fork", "Start a new run from a checkpoint (no data is copied).", ForkArguments, fork, read_only=False),
    ToolSpec(
        "write_artifact",
        "Add or replace one artifact: commits a new checkpoint with the head's state and artifacts plus this one.",
        WriteArtifactArguments,
        write_artifact,
        read_only=False,
    ),
)
