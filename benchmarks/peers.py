"""The peers agentfs is measured against, behind one small interface.

Every peer keeps the whole history (one record per step, as a checkpointer
does) and says honestly how durable a returned ``put`` is:

- ``durability = "power"``: fsync'd before ``put`` returns (survives power loss);
- ``"process"``: written to the OS (survives a crash of the process, not of the
  machine);
- ``"memory"``: kept in this process only.

``fsyncs`` is ``durability == "power"``.
"""

from __future__ import annotations

import contextlib
import gzip
import json
import os
import pickle
from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path
from typing import Any

State = dict[str, Any]


def tree_size(path: Path) -> int:
    """Apparent size (sum of st_size) of every file under ``path``."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            with contextlib.suppress(FileNotFoundError):
                total += os.stat(os.path.join(root, name)).st_size
    return total


def tree_files(path: Path) -> int:
    return sum(len(files) for _r, _d, files in os.walk(path))


class Peer(ABC):
    """A persistence tool an agent developer might pick instead of agentfs."""

    name: str = "peer"
    durability: str = "process"

    @property
    def fsyncs(self) -> bool:
        return self.durability == "power"

    @property
    def label(self) -> str:
        how = {"power": "fsync", "process": "no fsync", "memory": "memory only"}
        return f"{self.name} ({how[self.durability]})"

    @abstractmethod
    def put(self, thread: str, step: int, state: State) -> None:
        """Store ``state`` as step ``step`` of ``thread``."""

    @abstractmethod
    def get_latest(self, thread: str) -> State | None:
        """The newest state of ``thread``, or None."""

    @abstractmethod
    def size_on_disk(self) -> int:
        """Bytes the peer stores (for the in-memory peer: serialized bytes held)."""

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release files and connections."""


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class _FilePerStep(Peer):
    suffix = ".bin"

    def __init__(self, root: Path) -> None:
        self.root = root
        root.mkdir(parents=True, exist_ok=True)

    def _thread_dir(self, thread: str) -> Path:
        d = self.root / thread
        if not d.is_dir():
            d.mkdir(parents=True)
            if self.fsyncs:
                _fsync_dir(self.root)
        return d

    def _latest_path(self, thread: str) -> Path | None:
        d = self.root / thread
        if not d.is_dir():
            return None
        names = [n for n in os.listdir(d) if n.endswith(self.suffix)]
        return d / max(names) if names else None

    def size_on_disk(self) -> int:
        return tree_size(self.root)


class PickleFsync(_FilePerStep):
    """pickle.dumps to one new file per step, fsync of the file and its directory.

    (pickle executes code on load: shown as a baseline, not a recommendation.)
    """

    name = "pickle+fsync"
    durability = "power"
    suffix = ".pkl"

    def put(self, thread: str, step: int, state: State) -> None:
        d = self._thread_dir(thread)
        data = pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL)
        fd = os.open(d / f"{step:010d}.pkl", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        _fsync_dir(d)

    def get_latest(self, thread: str) -> State | None:
        p = self._latest_path(thread)
        return pickle.loads(p.read_bytes()) if p else None


class JsonGzip(_FilePerStep):
    """json.dumps + gzip (default level) to one new file per step, no fsync."""

    name = "json+gzip"
    durability = "process"
    suffix = ".json.gz"

    def put(self, thread: str, step: int, state: State) -> None:
        d = self._thread_dir(thread)
        (d / f"{step:010d}.json.gz").write_bytes(gzip.compress(json.dumps(state).encode()))

    def get_latest(self, thread: str) -> State | None:
        p = self._latest_path(thread)
        return json.loads(gzip.decompress(p.read_bytes())) if p else None


def _factories() -> dict[str, Callable[[Path], Peer]]:
    from . import peers_langgraph as lg
    from . import peers_turso as turso

    return {
        PickleFsync.name: PickleFsync,
        JsonGzip.name: JsonGzip,
        lg.InMemoryPeer.name: lg.InMemoryPeer,
        lg.SqlitePeer.name: lg.SqlitePeer,
        lg.ObjectStoragePeer.name: lg.ObjectStoragePeer,
        turso.TursoKvPeer.name: turso.TursoKvPeer,
        turso.TursoFilesPeer.name: turso.TursoFilesPeer,
    }


PEER_NAMES = [
    "pickle+fsync",
    "json+gzip",
    "LangGraph InMemorySaver",
    "LangGraph SqliteSaver",
    "LangGraph ObjectStorageSaver",
    "Turso agentfs-sdk KV",
    "Turso agentfs-sdk files",
]


def open_peers(root: Path) -> tuple[list[Peer], dict[str, str]]:
    """Every peer that can run here, each in its own directory under ``root``;
    and, for each one that cannot, why."""
    peers: list[Peer] = []
    missing: dict[str, str] = {}
    factories = _factories()
    for n, name in enumerate(PEER_NAMES):
        try:
            peers.append(factories[name](root / f"peer{n}"))
        except Exception as exc:
            missing[name] = f"{type(exc).__name__}: {exc}"
    return peers, missing
