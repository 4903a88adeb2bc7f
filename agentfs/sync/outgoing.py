"""What a pusher checks before a byte leaves the store: every upload re-hashed, so nothing corrupt is pushed.

The remote is create-only, so a corrupt copy uploaded once would stay there for good. Each check
raises an AgentFSError naming the record; the pusher refuses that record (and what needs it) and
pushes the rest.
"""

from __future__ import annotations

import threading

from ..format import codec
from ..format.entries import decode_entry_at
from ..format.refs import Location


def check_object(oid: bytes, blob: bytes, where: str, hasher: codec.Hasher = codec.hash_bytes) -> None:
    """An object file whose bytes do not hash to `oid` (or do not decode) raises IntegrityError."""
    codec.decode(blob, oid, where, hasher)


def check_entry(loc: Location, data: bytes, where: str, hasher: codec.Hasher = codec.hash_bytes) -> None:
    """A log entry that is damaged, not the checkpoint its name says, or packs a corrupt object raises."""
    entry = decode_entry_at(data, *loc, where, hasher)
    for oid in entry.pack:
        entry.packed(oid, where)


class Refusals:
    """What one push refused to upload (corrupt locally): objects, entries and records, each with its reason."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.objects: set[bytes] = set()
        self.entries: set[Location] = set()
        self.reasons: list[str] = []

    def object(self, oid: bytes, reason: str) -> None:
        with self.lock:
            self.objects.add(oid)
            self.reasons.append(reason)

    def entry(self, loc: Location, reason: str) -> None:
        with self.lock:
            self.entries.add(loc)
            self.reasons.append(f"checkpoint {loc[0]}@{loc[1]} not pushed: {reason}")

    def record(self, reason: str) -> None:
        with self.lock:
            self.reasons.append(reason)
