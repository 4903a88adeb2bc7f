"""What a pusher checks before a byte leaves the store: every upload re-hashed, so nothing corrupt is pushed.

The remote is create-only, so a corrupt copy uploaded once would stay there for good. Each check
raises an AgentFSError naming the record; the pusher refuses that record (and what needs it) and
pushes the rest.
"""

from __future__ import annotations

import threading

from ..format import codec, kinds
from ..format.entries import Entry, decode_entry_at
from ..format.refs import EntryAddress
from .index import PushIndex
from .leftovers import adopt_young
from .pack_remote import PackRemote


def check_object(oid: bytes, blob: bytes, where: str, hasher: codec.Hasher = codec.hash_bytes) -> None:
    """An object file whose bytes do not hash to `oid` (or do not decode) raises IntegrityError."""
    codec.decode(blob, oid, where, hasher)


def check_entry(loc: EntryAddress, data: bytes, where: str, hasher: codec.Hasher = codec.hash_bytes) -> None:
    """A log entry that is damaged, not the checkpoint its name says, or packs a corrupt object raises."""
    entry = decode_entry_at(data, *loc, where, hasher)
    for oid in entry.pack:
        entry.packed(oid, where)


class Refusals:
    """What one push refused to upload (corrupt locally): objects, entries and records, each with its reason."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.objects: set[bytes] = set()
        self.entries: set[EntryAddress] = set()
        self.reasons: list[str] = []

    def object(self, oid: bytes, reason: str) -> None:
        with self.lock:
            self.objects.add(oid)
            self.reasons.append(reason)

    def entry(self, loc: EntryAddress, reason: str) -> None:
        with self.lock:
            self.entries.add(loc)
            self.reasons.append(f"checkpoint {loc[0]}@{loc[1]} not pushed: {reason}")

    def record(self, reason: str) -> None:
        with self.lock:
            self.reasons.append(reason)


class Holdings:
    """What the remote holds by its pack indexes (a listing of packs/; only the indexes not kept here are
    fetched): the push index is a cache, and its claims are confirmed here before a head is published.

    A claim no pack index supports (the remote lost data) is counted and dropped by `settle`, so the
    object or entry goes up again
    (tests/sync/test_push_resume.py::test_a_push_uploads_again_what_the_remote_lost_before_it_publishes_a_head).

    packs/ is listed when a batch first asks about a record the push index or an earlier listing says the
    remote holds (the batch would skip it), and by a pusher's first batch (`listed` False), which also adopts
    what a push cut short left. A batch of new records only relies on no claim: it lists nothing, as a
    listing's cost grows with every pack the remote holds (one pack per daemon push)
    (tests/sync/test_push_listing.py).
    """

    def __init__(self, remote: PackRemote, index: PushIndex, *, listed: bool = False) -> None:
        self.remote = remote
        self.index = index
        self.lost_objects: set[bytes] = set()
        self.lost_entries: set[EntryAddress] = set()
        self.fresh = False  # packs/ listed for this batch
        if not listed:
            self._list()

    def _list(self) -> None:
        self.remote.catalogue.load_all()
        adopt_young(self.remote)
        self.fresh = True

    def object(self, oid: bytes) -> bool:
        claimed = oid in self.index.objects
        if self._named((kinds.OBJECT, oid), claimed):
            return True
        if claimed:
            self.lost_objects.add(oid)
        return False

    def entry(self, loc: EntryAddress) -> bool:
        claimed = loc in self.index.entries
        if self._named((kinds.ENTRY, kinds.pair_key(*loc)), claimed):
            return True
        if claimed:
            self.lost_entries.add(loc)
        return False

    def _named(self, key: tuple[int, bytes], claimed: bool) -> bool:
        """Whether the remote's pack indexes name the record `key`; a claim (the push index's, `claimed`, or an earlier
        listing's) is confirmed by a listing made for this batch first."""
        if not self.fresh and (claimed or key in self.remote.catalogue.places):
            self._list()
        return key in self.remote.catalogue.places

    def settle(self) -> None:
        """Drop from the push index what it claimed and the remote lacks."""
        if self.lost_objects or self.lost_entries:
            self.index.forget(self.lost_objects, self.lost_entries, set())


def borrowed_first(entries: dict[EntryAddress, tuple[bytes, Entry]]) -> list[EntryAddress]:
    """The entries in an order where each comes after those of `entries` it borrows from (ids ascending
    otherwise; iterative, as a run's entries may chain thousands deep)."""
    ordered: list[EntryAddress] = []
    placed: set[EntryAddress] = set()
    for start in sorted(entries):
        stack = [(start, False)]
        while stack:
            loc, deps_done = stack.pop()
            if deps_done:
                ordered.append(loc)
            elif loc not in placed:
                placed.add(loc)
                stack.append((loc, True))
                stack.extend((dep, False) for dep in entries[loc][1].borrowed() if dep in entries and dep not in placed)
    return ordered
