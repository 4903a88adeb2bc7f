"""What a remote's pack indexes say: which packs it holds and where each record lies in them
(docs/FORMAT.md, "Remote layout": pack index, "A pack gone").

A `PackRemote` holds one catalogue. Indexes never change once written, so each is fetched once and kept
under the store's state directory for the remote (`keep_in`); a pack a remote gc repacked is forgotten
and `packs/` listed again. Every record an index names is checked here before it is taken in: a key that
is not a valid run name and id (`../../x`), or in an encrypted remote not a stored name of this key, is
skipped and reported, never used.
"""

from __future__ import annotations

import logging
import posixpath
import threading
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import NamedTuple

from ..errors import AgentFSError, RemoteError
from ..format import crypto, keys, kinds
from ..format.pack import PACK_ID, decode_pack_index
from ..format.segment import IndexEntry
from ..fsutil import make_dirs, write_atomic
from ..names import check_id, check_name
from .remote import Remote, modified

MAX_INDEX = 64 << 20
RELIST = 1.0  # a miss lists packs/ again at most this often (seconds)

log = logging.getLogger("agentfs.sync")


class Place(NamedTuple):
    """Where a record lies on the remote: its pack and its frame there."""

    pack_id: str
    offset: int
    length: int


class Leftover(NamedTuple):
    """A key no reader uses: a pack without an index, or a file-like remote's temporary key (a push cut short)."""

    key: str
    modified: float  # seconds since the epoch
    size: int


class PackCatalogue:
    """The packs with an index on one remote, and the place of every record their indexes name.

    `places` and `ids` hold the plaintext keys and run names of the records; `sealer` (set by the
    PackRemote's use_keys) turns an encrypted remote's stored keys into them."""

    def __init__(self, transport: Remote, *, workers: int = 8) -> None:
        self.transport = transport
        self.workers = workers
        self.sealer: crypto.Sealer | None = None
        self.places: dict[tuple[int, bytes], Place] = {}
        self.ids: dict[tuple[int, str], set[str]] = {}  # (kind, run) -> record ids in the packs loaded
        self.pack_times: dict[str, float] = {}  # pack id -> when its index was written (from the last listing)
        self.unindexed: dict[str, Leftover] = {}  # pack id -> a pack without an index (from the last listing)
        self.skipped: list[str] = []  # pack records and indexes refused while learning (each logged once)
        self._frames: dict[str, list[IndexEntry]] = {}  # pack id -> its records, by offset
        self._lock = threading.Lock()
        # Hazard: forget() empties the record map and load_all() fills it again; a reader on another thread that
        # looked in between found nothing and reported a record the remote lists as vanished, not its missing pack.
        # Relisting holds this lock and a reader that misses waits for it
        # (tests/sync/test_hostile_remote.py::test_a_truncated_or_deleted_pack_is_named_and_the_rest_of_a_clone_proceeds).
        self._relisting = threading.Lock()
        self._listed_at = float("-inf")
        self._kept: Path | None = None

    @property
    def url(self) -> str:
        return self.transport.url

    def keep_in(self, directory: Path) -> None:
        """Keep the indexes read (and pushed) in `directory` (the store's state for this remote, packs/)."""
        self._kept = directory
        make_dirs(directory / "tmp", sync=False)

    def _kept_index(self, pack_id: str) -> Path | None:
        return None if self._kept is None else self._kept / f"{pack_id}{keys.PACK_INDEX_SUFFIX}"

    def load_index(self, pack_id: str) -> bool:
        """Learn the records of one pack from its index (kept locally once read); False if the remote lacks it."""
        if self.has(pack_id):
            return True
        kept = self._kept_index(pack_id)
        data = kept.read_bytes() if kept is not None and kept.is_file() else None
        if data is None:
            data = self.transport.read(self.transport.key(*keys.pack_index_key(pack_id)), MAX_INDEX)
            if data is None:
                return False
        _size, entries = decode_pack_index(data, pack_id, f"remote {self.url} pack index {pack_id}")
        self.learn(pack_id, entries)
        if kept is not None and not kept.is_file():
            write_atomic(kept.parent / "tmp", kept, data, sync=False)
        return True

    def keep_index(self, pack_id: str, data: bytes) -> None:
        """Keep the index of a pack this process pushed, as if read: confirming what the remote holds never fetches it."""
        kept = self._kept_index(pack_id)
        if kept is not None:
            write_atomic(kept.parent / "tmp", kept, data, sync=False, exclusive=False)

    def learn(self, pack_id: str, entries: list[IndexEntry]) -> list[IndexEntry]:
        """Take in where a pack's records lie (from its index, or from a pack this process just pushed); its
        records with plaintext keys.

        A record whose key is not a valid run name and id (`../../x`), or in an encrypted remote not a stored
        name of this key, is skipped and reported, never taken in:
        tests/sync/test_hostile_remote.py::test_a_traversal_run_name_inside_a_pack_is_skipped_naming_pack_and_key."""
        checked = (self._checked_entry(pack_id, entry) for entry in sorted(entries, key=lambda entry: entry.offset))
        frames = [entry for entry in checked if entry is not None]
        with self._lock:
            self._take(pack_id, frames)
            self._frames[pack_id] = frames
        return frames

    def _checked_entry(self, pack_id: str, entry: IndexEntry) -> IndexEntry | None:
        """The entry with its plaintext key; None (skipped and reported) if its key is not a valid one."""
        where = f"remote {self.url} pack {pack_id}"
        try:
            if self.sealer is not None:
                entry = IndexEntry(entry.kind, self.sealer.plain_key(entry.kind, entry.key, where), entry.offset, entry.length)
            if entry.kind in kinds.RUN_KINDS:
                run, record_id = kinds.split_pair_key(entry.key, where)
                check_name(run)
                check_id(record_id)
        except AgentFSError as exc:
            self.skip(f"{where}: skipped the {kinds.NAMES.get(entry.kind, 'unknown')} record with key {entry.key[:80]!r}: {exc}")
            return None
        return entry

    def skip(self, reason: str) -> None:
        """Report a record or pack index refused while the rest proceeds."""
        with self._lock:
            if reason in self.skipped:
                return
            self.skipped.append(reason)
        log.warning("%s", reason)

    def _take(self, pack_id: str, frames: list[IndexEntry]) -> None:
        for entry in frames:
            self.places.setdefault((entry.kind, entry.key), Place(pack_id, entry.offset, entry.length))
            if entry.kind in kinds.RUN_KINDS:
                run, record_id = kinds.split_pair_key(entry.key, "")
                self.ids.setdefault((entry.kind, run), set()).add(record_id)

    def has(self, pack_id: str) -> bool:
        """Whether this pack's index has been read (or its records learnt from a push)."""
        with self._lock:
            return pack_id in self._frames

    def pack_of(self, kind: int, key: bytes) -> str | None:
        """The pack that holds a record, as the indexes read say."""
        place = self.places.get((kind, key))
        return None if place is None else place.pack_id

    def frames_of(self, pack_id: str) -> list[IndexEntry]:
        """The records of one pack whose index was read, by offset (empty if none was)."""
        with self._lock:
            return self._frames.get(pack_id, [])

    def pack_frames(self) -> dict[str, list[IndexEntry]]:
        """Every pack whose index this remote has read: its records' kinds, keys and places."""
        with self._lock:
            return dict(self._frames)

    def pack_ids(self) -> list[str]:
        """Every pack with an index on the remote (a pack without one is still being pushed, or was cut short);
        notes when each index was written, in `pack_times`, and the packs without one, in `unindexed`."""
        suffix = keys.PACK_INDEX_SUFFIX
        infos = self.transport.list_infos(self.transport.key(keys.PACKS))
        if infos is None:
            return []
        times = {}
        packs: dict[str, Leftover] = {}
        for info in infos:
            name = posixpath.basename(str(info["name"]).rstrip("/"))
            stem, dot, ending = name.rpartition(".")
            if not dot or not PACK_ID.fullmatch(stem):
                continue
            if f".{ending}" == suffix:
                times[stem] = modified(info)
            elif f".{ending}" == keys.PACK_SUFFIX:
                packs[stem] = Leftover(str(info["name"]), modified(info), int(info.get("size") or 0))
        self.pack_times = times
        self.unindexed = {pack_id: leftover for pack_id, leftover in packs.items() if pack_id not in times}
        return sorted(times)

    def load_all(self, *, force: bool = True) -> None:
        """Learn every pack's records: list packs/ (at most once per RELIST seconds unless `force`), fetch new indexes."""
        now = time.monotonic()
        if not force and now - self._listed_at < RELIST:
            return
        self._listed_at = now
        listed = self.pack_ids()
        for gone in set(self.pack_frames()) - set(listed):  # repacked by a remote gc
            self.forget(gone)
        self.load_many(pack_id for pack_id in listed if not self.has(pack_id))

    def load_many(self, pack_ids: Iterable[str]) -> None:
        """Read the indexes of `pack_ids` (several at once); a damaged one is reported and its pack left out."""
        todo = list(pack_ids)
        if len(todo) <= 1:
            for pack_id in todo:
                self._load_or_skip(pack_id)
            return
        with ThreadPoolExecutor(self.workers, thread_name_prefix="agentfs-index") as pool:
            list(pool.map(self._load_or_skip, todo))

    def _load_or_skip(self, pack_id: str) -> None:
        try:
            self.load_index(pack_id)
        except RemoteError:
            raise  # the remote failed, not the index: retried by the caller
        except AgentFSError as exc:
            self.skip(f"skipped pack {pack_id}: {exc}")

    def locate(self, kind: int, key: bytes) -> Place | None:
        """Where the record lies; a miss lists packs/ again (not too often) for one pushed since the last look."""
        place = self.places.get((kind, key))
        if place is None:
            with self._relisting:
                place = self.places.get((kind, key))
                if place is None:
                    self.load_all(force=False)
                    place = self.places.get((kind, key))
        return place

    def relist_without(self, pack_id: str) -> None:
        """A pack read was gone (a remote gc repacked it): forget it and learn the packs that replaced it."""
        with self._relisting:
            self.forget(pack_id)
            self.load_all()

    def forget(self, pack_id: str) -> None:
        """Drop a pack the remote no longer holds: its places, and its index kept here."""
        with self._lock:
            self._frames.pop(pack_id, None)
            self.pack_times.pop(pack_id, None)
            self.places, self.ids = {}, {}
            for kept, frames in self._frames.items():  # a record the pack held may lie in another (a repack)
                self._take(kept, frames)
        kept_index = self._kept_index(pack_id)
        if kept_index is not None:
            kept_index.unlink(missing_ok=True)
