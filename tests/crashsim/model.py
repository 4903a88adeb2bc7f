"""The strict POSIX crash model: which states of a directory may a power loss leave after some ops?

File data survives only through an fsync/fdatasync of that file (as of that call); a directory
entry (create, rename, link, unlink, mkdir, rmdir) only through an fsync of that directory; a
directory whose own entry was never made durable vanishes with everything in it. What existed
when the trace started counts as durable (the caller syncs it first).

`States.durable()` is the state where nothing unsynced survived. `States.sample(rng)` is another
allowed state: each unsynced entry op of each directory kept or lost independently (in order), and
each file holding its synced bytes plus a random prefix of its later writes, the last one possibly
torn at a random byte. A state is a `Tree`: relative path -> file bytes, or None for a directory.
"""

from __future__ import annotations

import dataclasses
import os
import random
from collections.abc import Callable
from pathlib import Path

from .trace import Op

Tree = dict[str, bytes | None]


@dataclasses.dataclass
class Inode:
    is_dir: bool
    data: bytearray = dataclasses.field(default_factory=bytearray)
    synced: bytes = b""  # file bytes as of the last fsync
    pending: list[tuple[int, bytes, bool]] = dataclasses.field(default_factory=list)  # (offset, data, is_truncate)
    entries: dict[str, int] = dataclasses.field(default_factory=dict)  # directory: now
    durable: dict[str, int] = dataclasses.field(default_factory=dict)  # directory: as of the last fsync
    unsynced: list[tuple[str, int | None]] = dataclasses.field(default_factory=list)  # entry ops since: (name, inode or None)


def _apply_write(data: bytearray, offset: int, chunk: bytes, truncate: bool) -> None:
    if truncate:
        del data[offset:]
        data.extend(bytes(max(0, offset - len(data))))
        return
    if offset < 0:
        offset = len(data)
    if offset > len(data):
        data.extend(bytes(offset - len(data)))
    data[offset : offset + len(chunk)] = chunk


class States:
    """Replays ops over a model of the directory; ask it for allowed crash states at any point."""

    ROOT = 0

    def __init__(self, snapshot: Path) -> None:
        self.inodes: dict[int, Inode] = {}
        self._load(snapshot, self._new(True))

    def _new(self, is_dir: bool) -> int:
        number = len(self.inodes)
        self.inodes[number] = Inode(is_dir)
        return number

    def _load(self, path: Path, number: int) -> None:
        for entry in sorted(os.scandir(path), key=lambda e: e.name):
            child = self._new(entry.is_dir(follow_symlinks=False))
            node = self.inodes[child]
            if node.is_dir:
                self._load(Path(entry.path), child)
            else:
                node.data = bytearray(Path(entry.path).read_bytes())
                node.synced = bytes(node.data)
            self.inodes[number].entries[entry.name] = child
            self.inodes[number].durable[entry.name] = child

    def _lookup(self, path: str) -> int | None:
        number: int | None = self.ROOT
        for part in [] if path == "." else path.split("/"):
            number = self.inodes[number].entries.get(part) if number is not None else None
        return number

    def _parent(self, path: str) -> tuple[Inode, str]:
        parent, _, name = path.rpartition("/")
        number = self._lookup(parent or ".")
        if number is None or not self.inodes[number].is_dir:
            raise ValueError(f"trace: {path}: parent directory is not in the model (was it made outside the trace?)")
        return self.inodes[number], name

    def _set_entry(self, path: str, number: int | None) -> None:
        directory, name = self._parent(path)
        if number is None:
            directory.entries.pop(name, None)
        else:
            directory.entries[name] = number
        directory.unsynced.append((name, number))

    def apply(self, op: Op) -> None:
        if op.kind in ("ack", "syncall"):
            if op.kind == "syncall":
                for reachable in self._reachable():
                    self._sync(reachable)
            return
        number = self._lookup(op.path)
        if op.kind == "open":
            if number is None and "O_CREAT" in op.flags:
                number = self._new(False)
                self._set_entry(op.path, number)
            if number is not None and "O_TRUNC" in op.flags:
                self._write(number, 0, b"", truncate=True)
        elif op.kind == "mkdir":
            self._set_entry(op.path, self._new(True))
        elif op.kind in ("unlink", "rmdir"):
            self._set_entry(op.path, None)
        elif op.kind in ("rename", "link"):
            if number is None:
                raise ValueError(f"trace: {op.kind} of {op.path}, which the model does not hold")
            self._set_entry(op.target, number)
            if op.kind == "rename":
                self._set_entry(op.path, None)
        elif number is None:
            return  # a write or sync through a descriptor whose file is gone: nothing survives of it anyway
        elif op.kind == "write":
            self._write(number, op.offset, op.data)
        elif op.kind == "truncate":
            if "extend" not in op.flags or op.offset > len(self.inodes[number].data):
                self._write(number, op.offset, b"", truncate=True)
        elif op.kind == "fsync":
            self._sync(number)
        else:
            raise ValueError(f"trace: unknown op {op.kind}")

    def _write(self, number: int, offset: int, data: bytes, *, truncate: bool = False) -> None:
        node = self.inodes[number]
        if offset < 0:
            offset = len(node.data)
        _apply_write(node.data, offset, data, truncate)
        node.pending.append((offset, data, truncate))

    def _sync(self, number: int) -> None:
        node = self.inodes[number]
        if node.is_dir:
            node.durable = dict(node.entries)
            node.unsynced.clear()
        else:
            node.synced = bytes(node.data)
            node.pending.clear()

    def _reachable(self) -> list[int]:
        found, todo = [], [self.ROOT]
        while todo:
            number = todo.pop()
            found.append(number)
            todo.extend(self.inodes[number].entries.values() if self.inodes[number].is_dir else [])
        return found

    def current(self) -> Tree:
        """What a process crash (no power loss) leaves: everything done so far."""
        return self._tree(lambda node: node.entries, lambda node: bytes(node.data))

    def durable(self) -> Tree:
        """Only what was synced."""
        return self._tree(lambda node: node.durable, lambda node: node.synced)

    def sample(self, rng: random.Random) -> Tree:
        """Another allowed state, chosen by `rng`."""

        def entries(node: Inode) -> dict[str, int]:
            kept = dict(node.durable)
            for name, number in node.unsynced:
                if rng.random() < 0.5:
                    if number is None:
                        kept.pop(name, None)
                    else:
                        kept[name] = number
            return kept

        contents: dict[int, bytes] = {}  # one inode linked under two names holds the same bytes under both

        def content(node: Inode) -> bytes:
            if id(node) in contents:
                return contents[id(node)]
            data = bytearray(node.synced)
            survivors = rng.randint(0, len(node.pending))
            for index, (offset, chunk, truncate) in enumerate(node.pending[:survivors]):
                torn = index == survivors - 1 and not truncate and chunk and rng.random() < 0.5
                _apply_write(data, offset, chunk[: rng.randrange(len(chunk))] if torn else chunk, truncate)
            contents[id(node)] = bytes(data)
            return contents[id(node)]

        return self._tree(entries, content)

    def _tree(self, entries_of: Callable[[Inode], dict[str, int]], content_of: Callable[[Inode], bytes]) -> Tree:
        tree: Tree = {}
        todo = [("", self.ROOT)]
        seen: set[int] = set()
        while todo:
            prefix, number = todo.pop()
            for name, child in sorted(entries_of(self.inodes[number]).items()):
                path = f"{prefix}{name}"
                node = self.inodes[child]
                if node.is_dir:
                    if child not in seen:  # a directory renamed but synced in both parents shows once
                        seen.add(child)
                        tree[path] = None
                        todo.append((path + "/", child))
                else:
                    tree[path] = content_of(node)
        return tree


def materialize(tree: Tree, directory: Path) -> None:
    """Write `tree` out under `directory` (which must not exist yet)."""
    directory.mkdir(parents=True)
    for path, content in sorted(tree.items()):
        target = directory / path
        if content is None:
            target.mkdir()
        else:
            target.write_bytes(content)
