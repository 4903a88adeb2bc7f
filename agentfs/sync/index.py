"""What a remote is known to hold: append-only files under remotes/<name>/, loaded at start.

Appends are not fsynced: losing the tail after a power cut only means checking those keys again.
An encrypted store's files name runs by their stored names (format/crypto.py), translated as they are read.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

from ..engine.repository import Repository
from ..format.crypto import Sealer
from ..fsutil import make_dirs, write_atomic

OID_SIZE = 32


class PushIndex:
    """The index kept in `directory` (a Repository's remote_state_dir), its temp files in directory/tmp."""

    def __init__(self, directory: Path, sealer: Sealer | None = None) -> None:
        self.directory = directory
        self.sealer = sealer
        self.tmp = directory / "tmp"
        make_dirs(self.tmp, sync=False)
        self._lock = threading.Lock()
        self.objects = self._load_objects()
        self.entries = self._load_entries()
        self.records = {(kind, self._run(run), rid) for kind, run, rid in (line.split(" ") for line in self._lines("records"))}
        # entries a remote gc removed (retired): not pushed again unless a new entry borrows from them
        self.gone = {(self._run(run), cid) for run, _, cid in (line.rpartition(" ") for line in self._lines("gone"))}
        self.gc_seen = set(self._lines("gc"))  # remote gc runs whose plans this index has applied
        # format 2: the pack that holds a record, by kind byte + key in hex (a hint for head keys)
        self.places = dict(line.split(" ") for line in self._lines("places") if line.count(" ") == 1)

    def _load_objects(self) -> set[bytes]:
        path = self.directory / "objects"
        data = path.read_bytes() if path.exists() else b""
        usable = len(data) - len(data) % OID_SIZE  # a torn last record is dropped
        return {data[i : i + OID_SIZE] for i in range(0, usable, OID_SIZE)}

    def _load_entries(self) -> set[tuple[str, str]]:
        return {(self._run(run), checkpoint_id) for run, _, checkpoint_id in (line.rpartition(" ") for line in self._lines("entries"))}

    def _run(self, stored: str) -> str:
        return stored if self.sealer is None else self.sealer.run_name(stored, str(self.directory))

    def _stored(self, run: str) -> str:
        return run if self.sealer is None else self.sealer.stored_run(run)

    def _lines(self, name: str) -> list[str]:
        path = self.directory / name
        text = path.read_text() if path.exists() else ""
        return text.split("\n")[:-1]  # the part after the last newline is a torn record

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
                self._append("entries", "".join(f"{self._stored(run)} {cid}\n" for run, cid in fresh).encode())
                self.entries.update(fresh)

    def add_records(self, records: list[tuple[str, str, str]]) -> None:
        with self._lock:
            fresh = [record for record in records if record not in self.records]
            if fresh:
                self._append("records", "".join(f"{kind} {self._stored(run)} {rid}\n" for kind, run, rid in fresh).encode())
                self.records.update(fresh)

    def add_places(self, places: dict[str, str]) -> None:
        with self._lock:
            fresh = {key: pack for key, pack in places.items() if self.places.get(key) != pack}
            if fresh:
                self._append("places", "".join(f"{key} {pack}\n" for key, pack in fresh.items()).encode())
                self.places.update(fresh)

    def apply_gc(self, gc_id: str, objects: set[bytes], entries: set[tuple[str, str]]) -> None:
        """Forget what a remote gc deleted, so it is uploaded again if a new checkpoint needs it.

        The objects file is rewritten whole (atomically) before the gc is recorded as applied:
        a crash in between applies it again, which is harmless.
        """
        with self._lock:
            if objects & self.objects:
                self.objects -= objects
                write_atomic(self.tmp, self.directory / "objects", b"".join(sorted(self.objects)), sync=False, exclusive=False)
            fresh = sorted(entries - self.gone)
            if fresh:
                self._append("gone", "".join(f"{self._stored(run)} {cid}\n" for run, cid in fresh).encode())
                self.gone.update(fresh)
            self._append("gc", f"{gc_id}\n".encode())
            self.gc_seen.add(gc_id)

    def forget(self, objects: set[bytes], entries: set[tuple[str, str]], records: set[tuple[str, str, str]]) -> None:
        """Drop claims a recheck found false (the remote lacks these), so they are pushed again.

        Each file is rewritten whole (atomically); a crash midway leaves claims the next recheck finds again.
        """
        with self._lock:
            if objects:
                self.objects -= objects
                write_atomic(self.tmp, self.directory / "objects", b"".join(sorted(self.objects)), sync=False, exclusive=False)
            if entries:
                self.entries -= entries
                text = "".join(f"{self._stored(run)} {cid}\n" for run, cid in sorted(self.entries))
                write_atomic(self.tmp, self.directory / "entries", text.encode(), sync=False, exclusive=False)
            if records:
                self.records -= records
                text = "".join(f"{kind} {self._stored(run)} {rid}\n" for kind, run, rid in sorted(self.records))
                write_atomic(self.tmp, self.directory / "records", text.encode(), sync=False, exclusive=False)

    def write_reconciliation(self, summary: dict[str, Any]) -> None:
        write_atomic(self.tmp, self.directory / "reconciled.json", json.dumps(summary).encode(), sync=False, exclusive=False)

    def read_reconciliation(self) -> dict[str, Any] | None:
        try:
            return dict(json.loads((self.directory / "reconciled.json").read_text()))
        except (FileNotFoundError, ValueError):
            return None

    def restored(self, entry: tuple[str, str]) -> None:
        """A gone entry pushed again (a new checkpoint borrows from it)."""
        with self._lock:
            self.gone.discard(entry)

    def note_lost(self, objects: int, entries: int) -> None:
        """A push found the remote lacking what this index said it held (and uploaded it again): `status` says so."""
        found = {"found": time.time(), "objects": objects, "entries": entries}
        write_atomic(self.tmp, self.directory / "lost.json", json.dumps(found).encode(), sync=False, exclusive=False)

    def read_lost(self) -> dict[str, Any] | None:
        try:
            return dict(json.loads((self.directory / "lost.json").read_text()))
        except (FileNotFoundError, ValueError):
            return None

    def write_status(self, status: dict[str, Any]) -> None:
        write_atomic(self.tmp, self.directory / "status.json", json.dumps(status, indent=2).encode(), sync=False, exclusive=False)

    def note_divergence(self, checked: set[str], diverged: dict[str, list[str]]) -> None:
        """Record which of the `checked` runs have more than one head (`diverged`: run -> heads); `status` shows it."""
        known = {run: heads for run, heads in self.read_divergence().items() if run not in checked}
        stored = {self._stored(run): heads for run, heads in {**known, **diverged}.items()}
        write_atomic(self.tmp, self.directory / "diverged.json", json.dumps(stored).encode(), sync=False, exclusive=False)

    def read_divergence(self) -> dict[str, list[str]]:
        try:
            return {self._run(run): heads for run, heads in json.loads((self.directory / "diverged.json").read_text()).items()}
        except (FileNotFoundError, ValueError, AttributeError):
            return {}

    def read_status(self) -> dict[str, Any]:
        try:
            return dict(json.loads((self.directory / "status.json").read_text()))
        except (FileNotFoundError, ValueError):
            return {}


def remember_url(directory: Path, url: str) -> None:
    make_dirs(directory, sync=False)
    path = directory / "url"
    if not path.exists() or path.read_text() != url:
        path.write_text(url)
    os.utime(directory)


def synced_dirs(store: Repository) -> list[Path]:
    """The state directories of the remotes this store has pushed to or pulled from (those that know their URL)."""
    return [directory for name in store.remote_state_names() if ((directory := store.remote_state_dir(name)) / "url").is_file()]
