"""A run: a named chain of checkpoints, appended under the run's lock (one of a fixed set of stripes)."""

from __future__ import annotations

import random
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import timedelta
from typing import Any, TypeVar

from ..errors import Conflict, NotFound, SerializationError
from ..format.entries import encode_entry
from ..format.lineage import Parent
from ..format.manifest import Manifest, ValueRef
from ..format.refs import PACK_MAX, LooseRef, PackedRef, Ref, TreeRef, located
from ..format.segment import Record
from ..ids import new_id
from ..names import check_id, check_name
from ..objects.blobs import BlobWriter, TreeTooDeep
from ..serialization import encode_value
from ..serialization.values import LIST_BODY
from . import retention
from .checkpoint import Artifact, Checkpoint
from .commit_input import ArtifactSource, EncodedValue, check_artifacts, check_extends, encode_state, put_artifact
from .engine_api import EngineAPI, IdSlice
from .extend import Extension, extended_ref, grown_ref
from .journal import AsyncToolCall, Journal, ToolCall
from .retention import PruneReport
from .schema import Schema

UPDATE_RETRIES = 50
UPDATE_BACKOFF_MAX = 0.05  # seconds: the longest random pause between two attempts of update()
NO_METADATA = encode_value({}, "metadata")


class _Head:
    def __repr__(self) -> str:
        return "HEAD"


HEAD: Any = _Head()
T = TypeVar("T")


class Run:
    def __init__(self, store: EngineAPI, name: str, schema: Schema | None = None) -> None:
        self.store = store
        self.name = name
        self.schema = schema

    def __repr__(self) -> str:
        return f"<agentfs.Run {self.name!r}>"

    def ids(self) -> list[str]:
        """Every checkpoint id of the run, oldest first."""
        return self.store.ids(self.name)

    def id_slice(self, start: int | None = None, stop: int | None = None) -> IdSlice:
        """`ids()[start:stop]` (negative counts from the newest) with the run's checkpoint count (`total`) and the
        slice's first position (`start`): a page of a long run costs the page, not the run's whole history."""
        return self.store.id_slice(self.name, start, stop)

    def head_id(self) -> str | None:
        return self.store.head(self.name)

    def get(self, checkpoint_id: str) -> Checkpoint:
        check_id(checkpoint_id)
        return Checkpoint(self.store, self.store.read_entry(self.name, checkpoint_id).manifest, self.schema)

    def get_many(self, checkpoint_ids: list[str]) -> list[Checkpoint]:
        """`get` of each of `checkpoint_ids`, in order, its errors raised; a good part of a long run's checkpoints cost
        about a third as much each, their entries read from locations found once."""
        for checkpoint_id in checkpoint_ids:
            check_id(checkpoint_id)
        return [Checkpoint(self.store, entry.manifest, self.schema, entry) for entry in self.store.run_entries(self.name, checkpoint_ids)]

    def latest(self) -> Checkpoint | None:
        """The checkpoint with the greatest id: newest wins. If two machines appended to one parent, the
        other line is not returned here: see `heads()`. A damaged newest entry is skipped (and logged):
        the newest checkpoint that can be read is returned."""
        head = self.head_id()
        if head is None:
            return None
        newest = self._readable(head)
        return newest if newest is not None else next(iter(self.history(1)), None)

    def history(self, limit: int | None = None) -> list[Checkpoint]:
        """Checkpoints newest first (all of them, or the newest `limit`); damaged entries are skipped and logged."""
        found: list[Checkpoint] = []
        for checkpoint_id in reversed(self.ids()):
            if limit is not None and len(found) >= limit:
                break
            checkpoint = self._readable(checkpoint_id)
            if checkpoint is not None:
                found.append(checkpoint)
        return found

    def damaged(self) -> list[tuple[str, str]]:
        """(id, why) of each of the run's local entries that cannot be read: `verify --repair` or a pull fixes them."""
        return self.store.damaged_entries(self.name, self.ids())

    def heads(self) -> list[str]:
        """Ids of the run's checkpoints that no other checkpoint of it names as parent, oldest first.

        One head is a straight line; two or more mean divergence (two machines appended to the same
        parent), which `latest()` hides: it returns the greatest id. Format 1 reads every manifest of
        the run (from a per-process cache of 256 entries); damaged entries are left out.
        """
        return self.store.run_heads(self.name, self.ids())

    def parents(self, ids: list[str]) -> dict[str, str | None]:
        """Checkpoint id -> the parent its manifest names, for each of `ids` that can be read (damaged ones left out).

        One sweep of the run's records when `ids` is a good part of it: cheaper than `checkpoint(id).parent` each."""
        return self.store.run_parents(self.name, ids)

    def forks(self) -> set[str]:
        """Names of the runs forked from this one, and from those, and so on: every run that may borrow from it."""
        return self.store.forks_of(self.name)

    def retired(self) -> set[str]:
        """Ids of the run's checkpoints that retention removed on purpose (prune, delete, the store's policy)."""
        return self.store.retired_ids(self.name)

    def _readable(self, checkpoint_id: str) -> Checkpoint | None:
        entry = self.store.readable(self.name, checkpoint_id)
        return None if entry is None else Checkpoint(self.store, entry.manifest, self.schema)

    def commit(
        self,
        state: Any,
        *,
        artifacts: Mapping[str, ArtifactSource] | None = None,
        metadata: Mapping[str, Any] | None = None,
        parent: str | None = HEAD,
        keep_artifacts: bool = False,
    ) -> Checkpoint:
        """Durably append a checkpoint. With `parent=`, raise Conflict unless that is still the head.

        A checkpoint holds only the artifacts given to it; `keep_artifacts=True` starts from the
        artifacts of the checkpoint it is appended to, and `artifacts=` adds or replaces names.
        An `Artifact` of this store as a source is referenced, not copied.
        """
        if parent is not HEAD and parent is not None:
            check_id(parent)
        kind, values = encode_state(state)
        check_extends(values, parent)
        encoded_metadata = encode_value(dict(metadata), "metadata") if metadata else NO_METADATA
        sources = check_artifacts(artifacts) if artifacts else {}
        with self.store.writing():
            # first from what this process last indexed, without a look at the segments: the look under the run
            # lock (the one refresh per commit) then checks that choice; in the rare case that it was stale (a
            # compaction, a retired entry to borrow from) the commit starts over from a fresh look
            arguments = (parent, kind, values, encoded_metadata, sources, keep_artifacts)
            checkpoint = self._commit_once(*arguments, fresh=False)
            if checkpoint is None:
                checkpoint = self._commit_once(*arguments, fresh=True)
        assert checkpoint is not None, "an attempt from a fresh look under the gc lock is never stale"
        return checkpoint

    def _commit_once(
        self,
        parent: str | None,
        kind: str,
        values: dict[str, EncodedValue],
        metadata: bytes,
        sources: dict[str, ArtifactSource],
        keep_artifacts: bool,
        *,
        fresh: bool,
    ) -> Checkpoint | None:
        """One commit attempt under store.writing(); None if what it chose to reuse went meanwhile (never when `fresh`)."""
        # prune and compaction hold the gc lock exclusively: what this process's index holds after a look
        # taken now stays until this commit's entry is appended
        known = self.store.has_entry if fresh else self.store.knew_entry
        generation = self.store.index_generation
        hint = self.store.heads.get(self.name)
        if parent is not HEAD:
            # this process's own last append is taken without reading the head: this check only saves writing
            # objects in vain, the one under the run lock counts
            mine = parent is not None and parent == hint and known(self.name, parent)
            head = parent if mine else self.head_id()
            if parent != head:
                raise Conflict(f"run {self.name!r}: expected head {parent}, found {head}")
        else:  # any earlier entry of the run is as good to borrow from: skip reading the head
            head = hint if hint is not None and known(self.name, hint) else self.head_id()
        blobs = BlobWriter(self.store.object_writer, self._reusable(head), self.store.hasher)
        state_refs: dict[str, ValueRef] = {}
        artifact_refs: dict[str, Ref] = {}
        label = ""  # the value being stored, for a TreeTooDeep
        try:
            for key, value in values.items():
                label = f"state[{key!r}]"
                state_refs[key] = self._value_ref(blobs, head, key, value)
            for name, source in sources.items():
                label = f"artifact {name!r}"
                artifact_refs[name] = self._artifact_ref(blobs, name, source)
        except TreeTooDeep as exc:
            raise SerializationError(f"{label} of a commit to run {self.name!r}: {exc}") from None
        objects = blobs.finish()
        schema = None if self.schema is None else self.schema.version
        checkpoint = self._append(
            parent,
            kind,
            state_refs,
            artifact_refs,
            metadata,
            blobs.pack,
            schema=schema,
            keep_artifacts=keep_artifacts,
            objects=objects,
            chosen_at=None if fresh else generation,
        )
        if checkpoint is not None:  # its trees' chunks are now held: a later Extend of them need not check them
            self.store.db.held_trees.add(blobs.trees)
            self._hold_lists(values, state_refs)
        return checkpoint

    def update(
        self,
        fn: Callable[[Any], Any],
        *,
        artifacts: Mapping[str, ArtifactSource] | None = None,
        metadata: Mapping[str, Any] | None = None,
        keep_artifacts: bool = False,
        retries: int = UPDATE_RETRIES,
    ) -> Checkpoint:
        """Commit `fn(state of the head)` (`fn(None)` on an empty run) with `parent=` that head.

        If another writer moved the head meanwhile, read the new head and call `fn` again, up to
        `retries` times, so no writer's update is lost; `fn` may run more than once and must not
        have side effects. `artifacts`, `metadata` and `keep_artifacts` are passed to `commit`.
        """
        for attempt in range(retries + 1):
            head = self.latest()
            state = fn(None if head is None else head.state)
            try:
                return self.commit(
                    state, artifacts=artifacts, metadata=metadata, keep_artifacts=keep_artifacts, parent=None if head is None else head.id
                )
            except Conflict:
                if attempt < retries:  # a random pause, growing with the attempts, so contending writers spread out
                    time.sleep(random.uniform(0, min(UPDATE_BACKOFF_MAX, 0.001 * 2**attempt)))
        raise Conflict(f"run {self.name!r}: update gave up after {retries} retries; other writers kept moving the head")

    def fork(self, checkpoint_id: str, name: str) -> Run:
        """A new run whose first checkpoint is `checkpoint_id` of this run (no data is copied)."""
        target = Run(self.store, check_name(name, "run"))
        home = (self.name, checkpoint_id)
        with self.store.writing():  # prune holds it exclusively: the source cannot go while the fork borrows from it
            source = self.get(checkpoint_id).manifest
            if not self.store.has_entry(*home):
                raise NotFound(f"checkpoint {checkpoint_id} not found in run {self.name!r} (pruned)")
            self.store.note_fork(self.name, target.name)
            target._append(
                None,
                source.state_kind,
                {key: value.located(home) for key, value in source.state.items()},
                {art: located(ref, home) for art, ref in source.artifacts.items()},
                source.metadata,
                {},
                forked_from=[self.name, checkpoint_id],
                schema=source.schema,
            )
        return target

    # the journal of tool calls (see journal.py)

    @property
    def journal(self) -> Journal:
        return Journal(self)

    def tool_call(self, name: str, args: Any = None, *, key: str | None = None) -> ToolCall:
        """Journal one call: `with run.tool_call("search", {"q": q}, key=...) as call: call.result = ...`."""
        return self.journal.tool_call(name, args, key=key)

    def once(self, key: str, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """`fn(*args, **kwargs)` unless `key` already succeeded in this run's journal: then its recorded result."""
        return self.journal.once(key, fn, *args, **kwargs)

    def tool(self, name: str | None = None, *, key: Callable[..., str] | None = None) -> Callable[[Callable[..., T]], Callable[..., T]]:
        """Decorator: each call goes through `once`, keyed by `key(*args, **kwargs)` (default: name + hash of the args)."""
        return self.journal.tool(name, key=key)

    # retention (see retention.py)

    def prune(self, keep_last: int | None = None, keep_within: timedelta | float | None = None) -> PruneReport:
        """Remove all but the newest `keep_last` checkpoints and those younger than `keep_within`.

        A checkpoint that a kept one (of any run) borrows data from or was forked from is kept too.
        The objects only removed checkpoints used are freed by the next `store.gc()`.
        """
        return retention.prune(self.store, self.name, keep_last=keep_last, keep_within=keep_within)

    def delete(self) -> PruneReport:
        """Remove every checkpoint of the run (but those other runs' kept checkpoints need) and its journal."""
        return retention.delete_runs(self.store, [self.name])[0]

    # async twins (aio.py): the same calls, run off the event loop

    async def aids(self) -> list[str]:
        return await self.store.offload(self.ids)

    async def aid_slice(self, start: int | None = None, stop: int | None = None) -> IdSlice:
        return await self.store.offload(self.id_slice, start, stop)

    async def ahead_id(self) -> str | None:
        return await self.store.offload(self.head_id)

    async def aget(self, checkpoint_id: str) -> Checkpoint:
        return await self.store.offload(self.get, checkpoint_id)

    async def alatest(self) -> Checkpoint | None:
        return await self.store.offload(self.latest)

    async def ahistory(self, limit: int | None = None) -> list[Checkpoint]:
        return await self.store.offload(self.history, limit)

    async def acommit(
        self,
        state: Any,
        *,
        artifacts: Mapping[str, ArtifactSource] | None = None,
        metadata: Mapping[str, Any] | None = None,
        keep_artifacts: bool = False,
        parent: str | None = HEAD,
    ) -> Checkpoint:
        """commit() off the loop. Hazard: `state`, `metadata` and the artifacts are read on a pool thread
        while this awaits: another task must not change them until it returns. Cancelled once started,
        the commit still completes (it is then in history)."""
        return await self.store.offload(
            self.commit, state, artifacts=artifacts, metadata=metadata, keep_artifacts=keep_artifacts, parent=parent
        )

    async def aupdate(
        self,
        fn: Callable[[Any], Any],
        *,
        artifacts: Mapping[str, ArtifactSource] | None = None,
        metadata: Mapping[str, Any] | None = None,
        keep_artifacts: bool = False,
        retries: int = UPDATE_RETRIES,
    ) -> Checkpoint:
        """update() off the loop: `fn` (a plain function, it may run more than once) runs on a pool thread."""
        return await self.store.offload(
            self.update, fn, artifacts=artifacts, metadata=metadata, keep_artifacts=keep_artifacts, retries=retries
        )

    async def afork(self, checkpoint_id: str, name: str) -> Run:
        return await self.store.offload(self.fork, checkpoint_id, name)

    async def aprune(self, keep_last: int | None = None, keep_within: timedelta | float | None = None) -> PruneReport:
        return await self.store.offload(self.prune, keep_last, keep_within)

    async def adelete(self) -> PruneReport:
        return await self.store.offload(self.delete)

    async def aonce(self, key: str, coro_fn: Callable[..., Awaitable[T]], /, *args: Any, **kwargs: Any) -> T:
        """`await coro_fn(*args, **kwargs)` unless `key` already succeeded in this run's journal (see Journal.aonce)."""
        return await self.journal.aonce(key, coro_fn, *args, **kwargs)

    def atool_call(self, name: str, args: Any = None, *, key: str | None = None) -> AsyncToolCall:
        """`async with run.atool_call("search", {"q": q}, key=...) as call:` tool_call() for async code."""
        return self.journal.atool_call(name, args, key=key)

    def atool(
        self, name: str | None = None, *, key: Callable[..., str] | None = None
    ) -> Callable[[Callable[..., Awaitable[T]]], Callable[..., Awaitable[T]]]:
        """tool() for coroutine functions: each call goes through `aonce`."""
        return self.journal.atool(name, key=key)

    def _value_ref(self, blobs: BlobWriter, head: str | None, key: str, value: EncodedValue) -> ValueRef:
        where = f"state[{key!r}] of a commit to run {self.name!r}"
        if not isinstance(value, Extension):
            value_format, count, data = value
            if value_format == LIST_BODY and len(data) > PACK_MAX and head is not None:  # a list that may have grown
                grown = self._grown(blobs, head, key, value, where)
                if grown is not None:
                    return grown
            return ValueRef(value_format, count, blobs.put(data))
        base = None if head is None else self.store.read_entry(self.name, head).manifest.state.get(key)
        return extended_ref(self.store, blobs, base, (self.name, head or ""), value, where)

    def _grown(self, blobs: BlobWriter, head: str, key: str, value: tuple[int, int, bytes], where: str) -> ValueRef | None:
        """The list `value` stored as an extension of the head's under `key` (grown_ref); None if it is not one. A damaged
        head (unreadable) offers no list to grow, as it offers nothing to reuse."""
        head_entry = self.store.readable(self.name, head)
        if head_entry is None:
            return None
        return grown_ref(self.store, blobs, head_entry.manifest.state.get(key), (self.name, head), key, value, where)

    def _hold_lists(self, values: dict[str, EncodedValue], refs: dict[str, ValueRef]) -> None:
        """Keep the bytes of the commit's chunked lists: the next commit finds how each grew (HeldLists)."""
        for key, value in values.items():
            ref = refs[key]
            if not isinstance(value, Extension) and ref.format == LIST_BODY and isinstance(ref.blob, (LooseRef, TreeRef)):
                self.store.db.held_lists.add(self.name, key, ref.blob.oid, value[2])

    def _reusable(self, head: str | None) -> dict[bytes, Ref]:
        """Small objects the head already packed: an unchanged key costs nothing in the next entry.

        A damaged head offers nothing to reuse; the commit still appends after it (its parent is the
        damaged id, as it is the run's head)."""
        if head is None:
            return {}
        entry = self.store.readable(self.name, head)
        if entry is None:
            return {}
        home = (self.name, head)
        return {ref.oid: located(ref, home) for ref in entry.blob_refs() if isinstance(ref, PackedRef)}

    def _head_artifacts(self, head: str | None) -> dict[str, Ref]:
        if head is None:
            return {}
        home = (self.name, head)
        return {name: located(ref, home) for name, ref in self.store.read_entry(*home).manifest.artifacts.items()}

    def _artifact_ref(self, blobs: BlobWriter, name: str, source: ArtifactSource) -> Ref:
        """The ref of one artifact source; an Artifact of this store is referenced where it lies, no byte copied."""
        if not isinstance(source, Artifact):
            return put_artifact(blobs, source)
        if source.checkpoint._store.id != self.store.id:
            with source.open() as stream:
                return blobs.put_stream(stream)
        home = (source.checkpoint.run, source.checkpoint.id)
        # called under store.writing(): prune holds that lock exclusively, so an entry that exists now stays
        if not self.store.has_entry(*home):
            raise NotFound(f"artifact {name!r}: its checkpoint {source.checkpoint} was pruned")
        if home[0] != self.name:  # retention must know that this run now borrows from that one
            self.store.note_fork(home[0], self.name)
        return located(source.ref, home)

    def _append(
        self,
        parent: str | None,
        kind: str,
        state: dict[str, ValueRef],
        artifacts: dict[str, Ref],
        metadata: bytes,
        pack: dict[bytes, bytes],
        forked_from: list[str] | None = None,
        schema: int | None = None,
        keep_artifacts: bool = False,
        objects: Sequence[Record] = (),
        chosen_at: int | None = None,
    ) -> Checkpoint | None:
        """Append the entry after the head read under the run lock. `chosen_at`: the index generation at
        which the caller chose objects and entries to reuse without a fresh look; None (and nothing is
        appended) if a compaction or a retirement made that choice stale."""
        with self.store.appending(self.name):
            head = self.head_id()  # the look at other writers' records that this commit relies on
            if parent is not HEAD and parent != head:
                raise Conflict(f"run {self.name!r}: expected head {parent}, found {head}")
            if keep_artifacts:  # the head read under the run lock: the one this entry is appended to
                artifacts = {**self._head_artifacts(head), **artifacts}
            manifest = Manifest(
                run=self.name,
                id=new_id(after=head),
                parent=head,
                created=time.time_ns(),
                writer=self.store.writer(),
                metadata=metadata,
                state_kind=kind,
                state=state,
                artifacts=artifacts,
                forked_from=forked_from,
                schema=schema,
            )
            data, entry = encode_entry(manifest, pack, self.store.hasher)
            relies_on = set(entry.borrowed())  # made durable first: this entry is unreadable without them
            if chosen_at is not None and (
                chosen_at != self.store.index_generation or not all(self.store.knew_entry(*home) for home in relies_on)
            ):
                return None
            if head is not None:
                relies_on.add((self.name, head))
            if forked_from is not None:
                relies_on.add((forked_from[0], forked_from[1]))
            self.store.append_entry(
                self.name, manifest.id, data, objects=objects, relies_on=relies_on, refreshed=True, parent=Parent(manifest.parent)
            )
        self.store.heads[self.name] = manifest.id
        self.store.cache_entry((self.name, manifest.id), entry)
        return Checkpoint(self.store, manifest, self.schema)
