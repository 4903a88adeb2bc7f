"""Checkpoints as users see them: lazy, verified state and streamable artifacts."""

from __future__ import annotations

import datetime as dt
import io
import os
import secrets
from collections.abc import AsyncIterator, Iterator, Mapping
from functools import cached_property
from pathlib import Path
from typing import Any

from ..errors import NotFound
from ..format.entries import Entry
from ..format.manifest import VALUE_STATE, Manifest, ValueRef
from ..format.refs import EntryAddress, InlineRef, PackedRef, Ref, same_bytes
from ..names import check_name
from ..objects.blobs import BlobReader, blob_reader
from ..serialization import decode_body, decode_value
from .engine_api import EngineAPI
from .schema import Schema


class Checkpoint:
    """One committed checkpoint of a run. `state` is decoded on first access, every byte verified."""

    def __init__(self, store: EngineAPI, manifest: Manifest, schema: Schema | None = None, entry: Entry | None = None) -> None:
        self._store = store
        self.manifest = manifest
        self._schema = schema
        # the log entry it was read from, when the reader keeps it (Run.get_many): the values packed there are read
        # from it, verified as ever, instead of the entry being read and decoded again (a second time for every
        # checkpoint of a long run: the store's cache of entries holds the last 256)
        self._entry = entry

    @property
    def id(self) -> str:
        return self.manifest.id

    @property
    def run(self) -> str:
        return self.manifest.run

    @property
    def parent(self) -> str | None:
        return self.manifest.parent

    @property
    def created(self) -> dt.datetime:
        return dt.datetime.fromtimestamp(self.manifest.created / 1e9, tz=dt.timezone.utc)

    @property
    def writer(self) -> dict[str, Any]:
        return dict(self.manifest.writer)

    @property
    def forked_from(self) -> tuple[str, str] | None:
        source = self.manifest.forked_from
        return (source[0], source[1]) if source else None

    @property
    def schema_version(self) -> int | None:
        """The schema version the state was committed with (None: committed without a schema)."""
        return self.manifest.schema

    @cached_property
    def metadata(self) -> dict[str, Any]:
        return decode_value(self.manifest.metadata, f"metadata of {self}")  # type: ignore[no-any-return]

    @cached_property
    def state(self) -> Any:
        """The state, lifted to the run's schema version when it was committed with an older one."""
        if self._migrating:
            assert self._schema is not None
            return self._schema.migrate(self.stored_state, self.manifest.schema, f"checkpoint {self}")
        return self.stored_state

    @cached_property
    def stored_state(self) -> Any:
        """The state exactly as committed, without migrations."""
        if self.manifest.state_kind == VALUE_STATE:
            return self._stored_value("")
        return {key: self._stored_value(key) for key in self.manifest.state}

    @cached_property
    def _migrating(self) -> bool:
        if self._schema is None:
            return False
        return self._schema.check(self.manifest.schema, f"checkpoint {self}") < self._schema.version

    def value(self, key: str) -> Any:
        """One key of a mapping state, decoded and verified on its own ("" for a non-mapping state)."""
        if self._migrating:  # a migration sees the whole state: there is no per-key shortcut
            state = self.state
            if key == "" and self.manifest.state_kind == VALUE_STATE:
                return state
            if not isinstance(state, dict) or key not in state:
                raise NotFound(f"state key {key!r} not found in checkpoint {self} (after migration)")
            return state[key]
        return self._stored_value(key)

    def _stored_value(self, key: str) -> Any:
        stored = self._value_ref(key)
        where = f"{self} state[{key!r}]"
        data = self._blobs().read(stored.blob, self.address, where)
        return decode_body(stored.format, stored.items, data, where)

    def _blobs(self) -> BlobReader:
        return blob_reader(self._store) if self._entry is None else BlobReader(self._store.db, self._read_packed, lambda: self._store.pool)

    def _read_packed(self, oid: bytes, location: EntryAddress) -> bytes:
        if self._entry is not None and location == self.address:
            return self._entry.packed(oid, f"log entry {self.run}@{self.id}")
        return self._store.read_packed(oid, location)

    def _value_ref(self, key: str) -> ValueRef:
        stored = self.manifest.state.get(key)
        if stored is None:
            raise NotFound(f"state key {key!r} not found in checkpoint {self}")
        return stored

    @property
    def address(self) -> EntryAddress:
        """(run, id): where this checkpoint's log entry is."""
        return (self.run, self.id)

    # what front-ends show and compare of a checkpoint, from its manifest alone (nothing read)

    @property
    def state_kind(self) -> str:
        """MAP_STATE ("map"): a mapping stored key by key; VALUE_STATE ("value"): any other state, stored whole as key ""."""
        return self.manifest.state_kind

    def has_value(self, key: str) -> bool:
        """Whether the state has `key` ("" for a non-mapping state), nothing read."""
        return key in self.manifest.state

    def value_keys(self) -> list[str]:
        """The state's keys, in stored order, nothing read ([""] for a non-mapping state)."""
        return list(self.manifest.state)

    def value_sizes(self) -> dict[str, int]:
        """The stored (encoded) size in bytes of each state key's value ("" for a non-mapping state)."""
        return {key: stored.blob.size for key, stored in self.manifest.state.items()}

    @property
    def stored_size(self) -> int:
        """The bytes of all its values and artifacts (encoded, before deduplication or compression)."""
        return sum(ref.size for ref in self.manifest.blob_refs())

    def same_value(self, key: str, other: Checkpoint) -> bool:
        """Whether `key` holds the same encoded value here and in `other`, nothing read. Hazard: the same bytes
        cut with other chunking parameters (another store's, an older writer's) compare different."""
        return self._value_ref(key).same_value(other._value_ref(key))

    def value_in_entry(self, key: str) -> bool:
        """Whether `key`'s value is held in a log entry (inline or packed: at most PACK_MAX bytes), not in
        chunk objects: cheap to read, and small enough to keep in memory."""
        return isinstance(self._value_ref(key).blob, (InlineRef, PackedRef))

    @cached_property
    def artifacts(self) -> Artifacts:
        return Artifacts(self)

    # async twins (aio.py): `state` reads and verifies objects on first access; these do it off the loop

    async def astate(self) -> Any:
        return await self._store.offload(lambda: self.state)

    async def astored_state(self) -> Any:
        return await self._store.offload(lambda: self.stored_state)

    async def avalue(self, key: str) -> Any:
        return await self._store.offload(self.value, key)

    def __repr__(self) -> str:
        return f"<Checkpoint {self.run}@{self.id}>"

    def __str__(self) -> str:
        return f"{self.run}@{self.id}"


class Artifacts(Mapping[str, "Artifact"]):
    def __init__(self, checkpoint: Checkpoint) -> None:
        self._checkpoint = checkpoint
        self._refs = checkpoint.manifest.artifacts

    def __getitem__(self, name: str) -> Artifact:
        check_name(name, "artifact")
        ref = self._refs.get(name)
        if ref is None:
            raise NotFound(f"artifact {name!r} not found in checkpoint {self._checkpoint}")
        return Artifact(self._checkpoint, name, ref)

    def __iter__(self) -> Iterator[str]:
        return iter(self._refs)

    def __len__(self) -> int:
        return len(self._refs)


class Artifact:
    def __init__(self, checkpoint: Checkpoint, name: str, ref: Ref) -> None:
        self.checkpoint = checkpoint
        self.name = name
        self.ref = ref

    @property
    def size(self) -> int:
        return self.ref.size

    def same_content(self, other: Artifact) -> bool:
        """Whether both hold the same bytes, nothing read (with Checkpoint.same_value's hazard)."""
        return same_bytes(self.ref, other.ref)

    def _chunks(self) -> Iterator[bytes]:
        where = f"artifact {self.name!r} of {self.checkpoint}"
        return blob_reader(self.checkpoint._store).chunks(self.ref, self.checkpoint.address, where)

    def read_bytes(self) -> bytes:
        return b"".join(self._chunks())

    def open(self) -> io.BufferedReader:
        """A binary stream over the artifact; memory stays bounded by one chunk."""
        return io.BufferedReader(_ChunkStream(self._chunks()), buffer_size=1 << 16)

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the artifact to `path` atomically (a temp file beside it, then rename), durably.

        The one file core/ writes itself: the user's, outside the store (the engine owns the store's).
        """
        target = Path(path)
        temp = target.parent / f"{secrets.token_hex(12)}.agentfs-partial"
        try:
            with open(temp, "wb") as handle:
                for chunk in self._chunks():
                    handle.write(chunk)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(temp, target)
        finally:
            temp.unlink(missing_ok=True)
        directory = os.open(target.parent, os.O_RDONLY | os.O_DIRECTORY)  # the rename survives power loss only through this
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
        return target

    def __repr__(self) -> str:
        return f"<Artifact {self.name!r} of {self.checkpoint} ({self.size} bytes)>"

    # async twins (aio.py)

    async def aread_bytes(self) -> bytes:
        return await self.checkpoint._store.offload(self.read_bytes)

    async def asave(self, path: str | os.PathLike[str]) -> Path:
        return await self.checkpoint._store.offload(self.save, path)

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        """The artifact's bytes, one verified chunk at a time, each read off the loop (memory: one chunk)."""
        chunks = self._chunks()
        while (chunk := await self.checkpoint._store.offload(next, chunks, None)) is not None:
            yield chunk


class _ChunkStream(io.RawIOBase):
    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks = chunks
        self._current = memoryview(b"")

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self._current:
            chunk = next(self._chunks, None)
            if chunk is None:
                return 0
            self._current = memoryview(chunk)
        count = min(len(buffer), len(self._current))
        buffer[:count] = self._current[:count]
        self._current = self._current[count:]
        return count
