"""The local object database: objects/ab/cdef..., written once, read verified."""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from ..errors import AgentFSError, ObjectMissing
from ..format import codec
from ..format.refs import parse_node
from ..format.walk import Children, Reached
from ..fsutil import fsync_dir, fsync_file, make_dirs, write_temp

Fetch = Callable[[bytes], bytes | None]
log = logging.getLogger("agentfs")
REFERENCED_MAX = 1 << 20


class ObjectDB:
    def __init__(self, root: Path, tmp: Path, *, sync: bool) -> None:
        self.root = root
        self.tmp = tmp
        self.sync = sync
        self.fetch: Fetch | None = None  # set by a store with a remote: returns verified object-file bytes
        # objects a committed entry references: gc never deletes them, so reusing one needs no touch
        self.referenced: set[bytes] = set()
        self._prefix = str(root) + os.sep

    def path(self, oid: bytes) -> Path:
        return Path(self._path(oid))

    def _path(self, oid: bytes) -> str:
        name = oid.hex()
        return f"{self._prefix}{name[:2]}{os.sep}{name[2:]}"

    def touch(self, oid: bytes) -> bool:
        """True if the object exists; refreshes its mtime so that gc's grace period protects it again."""
        if oid in self.referenced:
            return True
        try:
            os.utime(self._path(oid))
        except FileNotFoundError:
            return False
        return True

    def mark_referenced(self, oids: set[bytes]) -> None:
        if len(self.referenced) > REFERENCED_MAX:
            self.referenced.clear()
        self.referenced.update(oids)

    def exists(self, oid: bytes) -> bool:
        return self.path(oid).is_file()

    def read(self, oid: bytes) -> bytes:
        path = self.path(oid)
        try:
            blob = path.read_bytes()
        except FileNotFoundError:
            return self._fetch(oid)[1]
        try:
            return codec.decode(blob, oid, str(path))
        except AgentFSError:
            # a corrupt local copy and a remote: its copy, verified, replaces ours (automatic repair)
            if self.fetch is None or (fetched := self.fetch(oid)) is None:
                raise
            log.warning("object %s is corrupt in %s: repaired from the remote", oid.hex(), self.root)
            return self.install(oid, fetched, f"remote object {oid.hex()}")

    def _fetch(self, oid: bytes) -> tuple[bytes, bytes]:
        """(object file, its bytes) fetched from the remote, verified and stored."""
        blob = self.fetch(oid) if self.fetch is not None else None
        if blob is None:
            raise ObjectMissing(f"object {oid.hex()} is missing from {self.root}")
        return blob, self.install(oid, blob, f"remote object {oid.hex()}")

    def install(self, oid: bytes, blob: bytes, where: str) -> bytes:
        """Verify an object file from elsewhere (a remote), store it, and return its bytes."""
        data = codec.decode(blob, oid, where)
        final = self.path(oid)
        make_dirs(final.parent, sync=self.sync)
        os.replace(write_temp(self.tmp, blob, sync=self.sync), final)
        return data

    def read_node(self, oid: bytes, where: str) -> Children:
        """A tree node's children; a corrupt node is an IntegrityError from read, not a malformed one."""
        return parse_node(self.read(oid), oid, where)

    def read_nodes(self, nodes: list[Reached]) -> list[Children | AgentFSError]:
        """For the closure walk (format.walk.reach): each node's children, or what stopped reading it."""
        out: list[Children | AgentFSError] = []
        for node in nodes:
            try:
                out.append(self.read_node(node.oid, f"{node.where}: tree node {node.oid.hex()}"))
            except AgentFSError as exc:
                out.append(exc)
        return out

    def read_raw(self, oid: bytes) -> bytes:
        """The object file's bytes as stored (compressed), for pushing to a remote."""
        try:
            return self.path(oid).read_bytes()
        except FileNotFoundError:
            return self._fetch(oid)[0]  # a store resumed from a remote holds only what it read

    def oids(self) -> Iterator[bytes]:
        if not self.root.is_dir():
            return
        with os.scandir(self.root) as fans:
            fan_names = sorted(e.name for e in fans if e.is_dir() and len(e.name) == 2)
        for fan in fan_names:
            names = os.listdir(self.root / fan)  # a list, not an iterator left open by a caller that stops early
            for name in names:
                try:
                    yield bytes.fromhex(fan + name)
                except ValueError:
                    continue

    def sizes(self) -> Iterator[int]:
        """The bytes each object takes here, object by object (those gc deletes meanwhile are skipped)."""
        for oid in self.oids():
            try:
                yield os.stat(self._path(oid)).st_size
            except FileNotFoundError:
                continue


class ObjectWriter:
    """Writes the new objects of one commit concurrently; `finish()` makes them all durable together.

    Each object is fsynced before its rename, so a name in objects/ always holds complete bytes;
    the fan-out directories are fsynced once each at the end, before the log entry is written.
    """

    MAX_IN_FLIGHT = 8

    def __init__(self, db: ObjectDB, pool: ThreadPoolExecutor) -> None:
        self.db = db
        self.pool = pool
        self.seen: set[bytes] = set()
        self.dirs: set[Path] = set()
        self.futures: list[Future[None]] = []
        self.slots = threading.BoundedSemaphore(self.MAX_IN_FLIGHT)
        self._seen_lock = threading.Lock()

    def _is_new(self, oid: bytes) -> bool:
        with self._seen_lock:
            if oid in self.seen:
                return False
            self.seen.add(oid)
        if not self.db.touch(oid):
            return True
        if self.db.sync and oid not in self.db.referenced:
            self._adopt(oid)
        return False

    def _adopt(self, oid: bytes) -> None:
        """Make an object found in place durable before this commit relies on it.

        Hazard: another writer, or a process killed before its syncs (or one with
        durability="process"), may have renamed it into place without fsyncing its bytes or its
        directory: deduplicating against it would let power loss take it from under this commit's
        acknowledged entry (tests/test_crash_states.py, the restart workload). Its bytes are synced
        here, its directory in finish() with those of the objects written; mark_referenced then
        spares the next commits of this process the work.
        """
        path = self.db.path(oid)
        fsync_file(path)
        make_dirs(path.parent, sync=True)
        self.dirs.add(path.parent)

    def add(self, data: bytes | memoryview) -> bytes:
        """Store `data` unless the store already holds it; returns its id."""
        oid = codec.hash_bytes(data)
        if self._is_new(oid):
            self._submit(self._write, oid, bytes(data))
        return oid

    def add_later(self, data: bytes | memoryview) -> Future[bytes]:
        """Like add(), with the hashing done on the pool too: the caller only cuts and copies."""
        return self._submit(self._hash_and_write, bytes(data))

    def _submit(self, job: Callable[..., Any], *args: Any) -> Future[Any]:
        self.slots.acquire()  # bounds memory: at most MAX_IN_FLIGHT chunks are held at once
        try:
            future = self.pool.submit(job, *args)
        except BaseException:
            self.slots.release()
            raise
        self.futures.append(future)
        return future

    def _hash_and_write(self, data: bytes) -> bytes:
        try:
            oid = codec.hash_bytes(data)
            if self._is_new(oid):
                self._write(oid, data, release=False)
            return oid
        finally:
            self.slots.release()

    def _write(self, oid: bytes, data: bytes, release: bool = True) -> None:
        try:
            blob = codec.encode(data)
            final = self.db.path(oid)
            make_dirs(final.parent, sync=self.db.sync)
            os.replace(write_temp(self.db.tmp, blob, sync=self.db.sync), final)  # replacing an object only ever puts the same bytes back
            self.dirs.add(final.parent)
        finally:
            if release:
                self.slots.release()

    def finish(self) -> None:
        for future in self.futures:
            future.result()
        self.futures.clear()
        if self.db.sync and self.dirs:
            list(self.pool.map(fsync_dir, sorted(self.dirs)))
        self.dirs.clear()
