"""What a remote is known to hold: append-only files under remotes/<name>/, loaded at start.

Appends are not fsynced: losing the tail after a power cut only means checking those keys again.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

from ..fsutil import make_dirs, write_atomic

OID_SIZE = 32


class PushIndex:
    def __init__(self, directory: Path, tmp: Path) -> None:
        self.directory = directory
        self.tmp = tmp
        make_dirs(directory, sync=False)
        self._lock = threading.Lock()
        self.objects = self._load_objects()
        self.entries = self._load_entries()

    def _load_objects(self) -> set[bytes]:
        path = self.directory / "objects"
        data = path.read_bytes() if path.exists() else b""
        usable = len(data) - len(data) % OID_SIZE  # a torn last record is dropped
        return {data[i : i + OID_SIZE] for i in range(0, usable, OID_SIZE)}

    def _load_entries(self) -> set[tuple[str, str]]:
        path = self.directory / "entries"
        text = path.read_text() if path.exists() else ""
        lines = text.split("\n")[:-1]  # the part after the last newline is a torn record
        return {(run, checkpoint_id) for run, _, checkpoint_id in (line.rpartition(" ") for line in lines)}

    def _append(self, name: str, data: bytes) -> None:
        path = self.directory / name
        with open(path, "ab") as handle:
            if name == "objects" and handle.tell() % OID_SIZE:
                handle.truncate(handle.tell() - handle.tell() % OID_SIZE)  # drop a torn record first
            handle.write(data)

    def add_objects(self, oids: list[bytes]) -> None:
        with self._lock:
            fresh = [oid for oid in oids if oid not in self.objects]
            if fresh:
                self._append("objects", b"".join(fresh))
                self.objects.update(fresh)

    def add_entries(self, entries: list[tuple[str, str]]) -> None:
        with self._lock:
            fresh = [entry for entry in entries if entry not in self.entries]
            if fresh:
                self._append("entries", "".join(f"{run} {cid}\n" for run, cid in fresh).encode())
                self.entries.update(fresh)

    def write_status(self, status: dict[str, Any]) -> None:
        write_atomic(self.tmp, self.directory / "status.json", json.dumps(status, indent=2).encode(), sync=False, exclusive=False)

    def read_status(self) -> dict[str, Any]:
        try:
            return dict(json.loads((self.directory / "status.json").read_text()))
        except (FileNotFoundError, ValueError):
            return {}


def remote_dirs(remotes_dir: Path) -> list[Path]:
    if not remotes_dir.is_dir():
        return []
    return sorted(p for p in remotes_dir.iterdir() if p.is_dir() and (p / "url").is_file())


def remember_url(directory: Path, url: str) -> None:
    make_dirs(directory, sync=False)
    path = directory / "url"
    if not path.exists() or path.read_text() != url:
        path.write_text(url)
    os.utime(directory)
