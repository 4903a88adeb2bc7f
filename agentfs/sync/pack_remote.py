"""A format-2 remote: packs, pack indexes and head keys (docs/FORMAT.md, "Remote layout").

Reading is by ranged GETs of record frames whose places the pack indexes give. Indexes never change
once written, so each is fetched once and kept under the remote's local state directory. Every
frame read is checked (its checksum, its kind and key); callers verify the content's hash.

An encrypted remote (`use_keys`): packs hold stored run names and sealed bodies, as the store's segments
do (format/crypto.py); this class takes and returns run names and plaintext keys, opens every body it
reads (authenticated before anything decodes it), and names head and retirement keys by stored names.
"""

from __future__ import annotations

import contextlib
import errno
import threading
from typing import Any

from ..engine.repository import Repository
from ..errors import AgentFSError, FormatError, RemoteDataMissing, RemoteError, WrongKey
from ..format import codec, crypto, keys, kinds
from ..format.config import MAX_CONFIG, check_remote_config, encode_config, encrypted
from ..format.keys import CONFIG, JOURNAL_RECORDS, LOG_RECORDS, RETIRED_RECORDS
from ..format.pack import MAX_HEAD, Head, decode_head
from ..format.retirement import Retirement
from ..format.segment import KEYED_FRAME, IndexEntry, decode_record
from ..names import ID, check_id, check_name
from .authority import admit
from .index import PushIndex, remember_url
from .pack_catalogue import Leftover, PackCatalogue, Place
from .remote import Remote

MAX_FRAME = 64 << 20
MAX_OBJECT_FRAME = KEYED_FRAME.size + 32 + codec.MAX_BLOB  # an object's frame: its head, its key (the oid), its blob
# one ranged GET fetches neighbouring records up to this many bytes (half a pack: pack_upload.PACK_TARGET); times the
# reading threads, it bounds a reader's memory (tests/sync/test_sync_memory.py)
READ_AHEAD = 4 << 20
AHEAD_MAX = 32 << 20  # objects read ahead and not yet asked for are kept up to this many bytes

__all__ = ["Leftover", "PackRemote", "describe", "open_remote"]


class PackRemote:
    """A format-2 remote; as a store's `Source`, it fetches what the store lacks by ranged reads.

    It holds its `transport`, a Remote (sync/remote.py): the fsspec plumbing that moves bytes to and
    from the URL (create-only puts, bounded reads, listings, errors with secrets redacted) and knows
    nothing of what the keys mean. This class gives them their meaning: the config, packs, head keys,
    retirement keys and what the store has fetched (`index`), as restic's Repository holds its backend
    rather than being one. Which packs there are and where each record lies is its `catalogue`
    (sync/pack_catalogue.py, what the pack indexes say).
    """

    def __init__(self, url: str, storage_options: dict[str, Any], *, workers: int = 8) -> None:
        self.transport = Remote(url, storage_options)
        self.catalogue = PackCatalogue(self.transport, workers=workers)
        self.index: PushIndex | None = None  # what the attached store fetched from here (attach)
        self.config: dict[str, Any] | None = None  # set once identify() has read and checked it
        self._lock = threading.Lock()  # guards the records read ahead and the per-pack locks
        self._pack_locks: dict[str, threading.Lock] = {}
        self._ahead: dict[tuple[int, bytes], bytes] = {}
        self._ahead_bytes = 0
        self._store: Repository | None = None
        self.heads: dict[str, Head] = {}  # run -> what its newest head key said, when head_id last read it
        self.sealer: crypto.Sealer | None = None

    def __repr__(self) -> str:
        return f"<PackRemote {self.url}>"

    @property
    def url(self) -> str:
        """The remote's URL, credentials redacted: what every message about it names."""
        return self.transport.url

    def identify(self) -> dict[str, Any]:
        """The remote's config, checked: a URL with none (a typo, a missing bucket) is refused, never read as empty."""
        if self.config is None:
            data = self.transport.read(self.transport.key(CONFIG), MAX_CONFIG)
            if data is None:
                raise RemoteError(f"remote {self.url} holds no agentfs store (no config): check the bucket and path (a push creates one)")
            self.config = check_remote_config(data, f"remote {self.url} config")
        return self.config

    def ensure_config(self, config: dict[str, Any]) -> None:
        """For a pusher: create the remote's config on the first push, else check that this agentfs can write its format
        (the config read here is the one checked: one request, not a second read by identify())."""
        data = self.transport.read(self.transport.key(CONFIG), MAX_CONFIG)
        if data is None:
            self.transport.create(self.transport.key(CONFIG), encode_config(config), compare=False)
            self.identify()  # read back: another pusher's config may have been put first
        else:
            self.config = check_remote_config(data, f"remote {self.url} config")

    def use_keys(self, sealer: crypto.Sealer | None) -> None:
        """Read and write this remote with the store's keys (None: plaintext); refused unless the remote's
        config says the same (an encrypted remote is never read as plaintext, nor under another key)."""
        field = encrypted(self.identify())
        if sealer is None and field is not None:
            raise WrongKey(f"remote {self.url} is encrypted: open the store with its passphrase or key file (encryption=...)")
        if sealer is not None and (field is None or field["key_id"] != sealer.key_id):
            what = "is not encrypted" if field is None else "is encrypted under another master key"
            raise WrongKey(f"remote {self.url} {what}: an encrypted store pushes to a fresh URL or to its own remote")
        self.sealer = sealer
        self.catalogue.sealer = sealer

    @property
    def hasher(self) -> codec.Hasher:
        """How this remote's object ids are made: sha256, or the keyed id of an encrypted remote."""
        return codec.hash_bytes if self.sealer is None else self.sealer.object_id

    def stored_run(self, run: str) -> str:
        """The run's name in this remote's keys: its stored name when encrypted."""
        return run if self.sealer is None else self.sealer.stored_run(run)

    def run_name(self, stored: str) -> str:
        """stored_run's inverse: the name a run of this remote's keys stands for."""
        return stored if self.sealer is None else self.sealer.run_name(stored, f"remote {self.url}")

    def key_slots(self) -> list[crypto.Slot]:
        """An encrypted remote's key slots (keys/<slot id>): how a machine resuming from it unlocks it."""
        found = []
        for name in self.transport.list_names(self.transport.key(keys.KEY_SLOTS)):
            data = self.transport.read(self.transport.key(*keys.key_slot_key(name)), MAX_HEAD)
            if data is not None:
                with contextlib.suppress(FormatError):  # a damaged slot opens nothing; the others may
                    found.append(crypto.decode_slot(data, f"remote {self.url} key slot {name}"))
        return found

    def put_slot(self, slot: crypto.Slot) -> None:
        self.transport.create(self.transport.key(*keys.key_slot_key(slot.slot_id)), slot.to_bytes())

    def remove_slot(self, slot_id: str) -> None:
        self.transport.delete(self.transport.key(*keys.key_slot_key(slot_id)))

    # what a push puts up (sync/push.py): create-only keys; one that exists with other bytes is a RemoteError

    def put_pack(self, pack_id: str, data: bytes) -> None:
        self.transport.create(self.transport.key(*keys.pack_key(pack_id)), data)

    def put_pack_index(self, pack_id: str, footer: bytes) -> None:
        self.transport.create(self.transport.key(*keys.pack_index_key(pack_id)), footer)

    def put_retirement(self, run: str, record_id: str, body: bytes) -> None:
        """A retirement record (its body as stored) under its own key too, beside its pack (FORMAT.md)."""
        self.transport.create(self.transport.key(*keys.retired_key(self.stored_run(run), record_id)), body)

    def head_key(self, stored: str, checkpoint_id: str) -> str:
        """The key of a head (`stored`: the run's stored name), as messages name it."""
        return self.transport.key(*keys.head_key(stored, checkpoint_id))

    def put_head(self, stored: str, checkpoint_id: str, data: bytes) -> bytes | None:
        """Create a head key: None; if it exists already, what it holds (b"" if gone meanwhile), for the caller to check."""
        key = self.head_key(stored, checkpoint_id)
        if self.transport.create(key, data, compare=False):
            return None
        return self.transport.read(key, MAX_HEAD) or b""

    def attach(self, store: Repository) -> None:
        """Record what is fetched from here in the store's index for this remote; check the remote's format and keys."""
        if self.index is not None:
            return
        self.identify()
        self.index = PushIndex(store.remote_state_dir(self.transport.name), store.sealer)
        remember_url(self.index.directory, self.url)
        (self.index.directory / "pulled").touch()
        self.use_keys(store.sealer)
        self.keep_indexes(store)

    def keep_indexes(self, store: Repository) -> None:
        """Keep the pack indexes read (and pushed) under the store's state directory for this remote."""
        self._store = store
        self.catalogue.keep_in(store.remote_state_dir(self.transport.name) / keys.PACKS)

    # reading records

    def read_body(self, kind: int, key: bytes) -> bytes | None:
        """A record's body as the remote holds it, its frame checked; None if no pack holds it."""
        with self._lock:
            body = self._ahead.pop((kind, key), None)
            if body is not None:
                self._ahead_bytes -= len(body)
                return body
        for _attempt in range(2):
            place = self.catalogue.locate(kind, key)
            if place is None:
                return None
            with self._lock:
                pack_lock = self._pack_locks.setdefault(place.pack_id, threading.Lock())
            with pack_lock:
                with self._lock:  # another thread may have read it ahead while we waited
                    body = self._ahead.pop((kind, key), None)
                    if body is not None:
                        self._ahead_bytes -= len(body)
                        return body
                body = self._read_range(kind, key, place)
            if body is not None:
                return body
            if place.pack_id in self.catalogue.pack_ids():  # a remote gc deletes a pack's index before the pack: lost, not repacked
                raise RemoteDataMissing(
                    f"remote {self.url}: pack {place.pack_id} is missing, but its index lists {kinds.NAMES[kind]} {describe(kind, key)}"
                )
            self.catalogue.relist_without(place.pack_id)  # a remote gc repacked it: its live records are in a newer pack
        return None

    def _read_range(self, kind: int, key: bytes, place: Place) -> bytes | None:
        pack_id, offset, length = place
        # entries are read ahead only for a reader with no store (verify --remote, remote gc: they read every one)
        reads_ahead = kind == kinds.OBJECT or (kind == kinds.ENTRY and self._store is None)
        frames = self._following(kind, key, place) if reads_ahead else [IndexEntry(kind, key, offset, length)]
        end = frames[-1].offset + frames[-1].length
        where = f"remote {self.url} pack {pack_id}"
        pack = self.transport.key(*keys.pack_key(pack_id))
        if end - offset > MAX_FRAME + READ_AHEAD or (kind == kinds.OBJECT and length > MAX_OBJECT_FRAME):
            raise RemoteError(f"{where}: a record at offset {offset} says it is {length} bytes; refused")
        try:
            with self.transport.failing(f"read {pack}", FileNotFoundError):
                data = self._cat_range(pack, offset, end, where)
        except FileNotFoundError:
            return None  # removed by a remote gc since its index was read
        if len(data) < end - offset:
            raise FormatError(f"{where} is truncated: {len(data)} of the {end - offset} bytes its index places at offset {offset}")
        asked, *ahead = frames
        found = self._body(data[: asked.length], asked, where)
        for frame in ahead:  # a damaged neighbour is not kept: read alone, it is refused on its own
            with contextlib.suppress(AgentFSError):
                body = self._body(data[frame.offset - offset : frame.offset - offset + frame.length], frame, where)
                with self._lock:
                    self._ahead[(frame.kind, frame.key)] = body
                    self._ahead_bytes += len(body)
        return found

    def _cat_range(self, pack: str, start: int, end: int, where: str) -> bytes:
        try:
            return bytes(self.transport.fs.cat_file(pack, start=start, end=end))
        except FileNotFoundError:
            raise
        except OSError as exc:
            if exc.errno == errno.EINVAL:  # s3fs's answer to a range past the end (HTTP 416)
                raise FormatError(f"{where} is truncated: it ends before offset {start}, where its index places a record") from None
            raise

    def _body(self, data: bytes, frame: IndexEntry, where: str) -> bytes:
        where = f"{where} offset {frame.offset}"
        record = decode_record(data, where)
        stored = frame.key if self.sealer is None else self.sealer.stored_key(frame.kind, frame.key)
        if (record.kind, record.key) != (frame.kind, stored):
            raise FormatError(f"{where}: the record is not the one its index names")
        body = record.body if self.sealer is None else self.sealer.open(frame.kind, stored, record.body, where)
        if record.kind == kinds.OBJECT:  # a decompression bomb is refused here (after authentication), naming the remote and pack
            codec.check_size(body, record.key, where)
        return body

    def _following(self, kind: int, key: bytes, place: Place) -> list[IndexEntry]:
        """The record's frame and the frames of its kind right after it that the store lacks, up to READ_AHEAD bytes."""
        frames = self.catalogue.frames_of(place.pack_id)
        offset = place.offset
        at = next(i for i, frame in enumerate(frames) if frame.offset == offset)
        chosen = [frames[at]]
        budget = READ_AHEAD if self._ahead_bytes < AHEAD_MAX else 0
        for frame in frames[at + 1 :]:
            if frame.kind != kind or frame.offset != chosen[-1].offset + chosen[-1].length:
                break
            if sum(f.length for f in chosen) + frame.length > budget:
                break
            held_here = kind == kinds.OBJECT and self._store is not None and self._store.db.exists(frame.key)
            if (frame.kind, frame.key) in self._ahead or held_here:
                break
            chosen.append(frame)
        return chosen

    # the Source protocol (engine/repository.py)

    def fetch_object(self, oid: bytes) -> bytes | None:
        data = self.read_body(kinds.OBJECT, oid)
        if data is not None and self.index is not None:
            self.index.add_objects([oid])
        return data

    def fetch_entry(self, run: str, checkpoint_id: str) -> bytes | None:
        """The entry's bytes; None if no pack holds it. RemoteDataMissing if the run's head key names it (or
        a pack index lists it) and its bytes are gone: a resuming reader must not start over, nor from an
        older checkpoint
        (tests/sync/test_hostile_remote.py::test_a_head_key_naming_a_missing_checkpoint_is_an_error_never_the_older_one)."""
        head = self.heads.get(run)
        head_key = self.transport.key(*keys.head_key(run, checkpoint_id))
        named = "" if head is None or head.checkpoint_id != checkpoint_id else f"; head key {head_key} names it"
        try:
            data = self.read_body(kinds.ENTRY, kinds.pair_key(check_name(run), check_id(checkpoint_id)))
        except RemoteDataMissing as exc:
            raise RemoteDataMissing(f"{exc}{named}") from None
        if data is None and named:
            raise RemoteDataMissing(
                f"remote {self.url}: head key {head_key} names checkpoint {run}@{checkpoint_id}, "
                f"but no pack holds it (the head key names packs {', '.join(head.packs) if head else '-'})"
            )
        if data is not None and self.index is not None:
            self.index.add_entries([(run, checkpoint_id)])  # so a push to this remote never sends it back
        return data

    def fetch_record(self, kind: str, run: str, record_id: str) -> bytes | None:
        data = None
        if kind == RETIRED_RECORDS:  # its own key first: no pack index needed
            stored = self.stored_run(check_name(run))
            data = self.transport.read(self.transport.key(*keys.retired_key(stored, check_id(record_id))), MAX_FRAME)
            if data is not None and self.sealer is not None:
                key = kinds.pair_key(stored, record_id)
                data = self.sealer.open(kinds.RETIRED, key, data, f"remote {self.url} retirement key {run} {record_id}")
        if data is None:
            data = self.read_body(kinds.KIND_OF[kind], kinds.pair_key(check_name(run), check_id(record_id)))
        if data is not None and self.index is not None:
            self.index.add_records([(kind, run, record_id)])
        return data

    def check_retirement(self, record: Retirement) -> None:
        """RetirementRefused unless this remote may apply `record` to the attached store (sync/authority.py)."""
        assert self._store is not None, "attach the remote to a store first"
        admit(self._store, self, record)

    def fetch_journal(self, run: str, record_id: str) -> bytes | None:
        return self.fetch_record(JOURNAL_RECORDS, run, record_id)

    def list_journal(self, run: str) -> list[str]:
        return self.list_ids(run, JOURNAL_RECORDS)

    def list_ids(self, run: str, kind: str = LOG_RECORDS) -> list[str]:
        """The run's ids of `kind`; retirement records by one listing of their own keys, the rest from every pack index."""
        if kind == RETIRED_RECORDS:
            directory = self.transport.key(*keys.retired_dir_key(self.stored_run(check_name(run))))
            return sorted(name for name in self.transport.list_names(directory) if ID.fullmatch(name))
        self.catalogue.load_all(force=False)
        return sorted(self.catalogue.ids.get((kinds.KIND_OF[kind], check_name(run)), ()))

    def list_runs(self) -> list[str]:
        self.catalogue.load_all(force=False)
        return sorted({run for kind, run in self.catalogue.ids if kind == kinds.ENTRY})

    def head_id(self, run: str) -> str | None:
        """The id named by the run's newest head key (the first one listed: keys.head_name); the packs it
        names are learnt (their indexes fetched)."""
        where = f"remote {self.url} run {check_name(run)!r}"

        def head_of(name: str) -> str | None:
            # a draft of format 2 (before 2026-11-24) named head keys by the plain id, which sorts before every
            # head name: the listing starts before them, so such a remote is refused, not read as one without
            # this run's work
            if ID.fullmatch(name) and name <= keys.HEAD_NAMES_AFTER:
                raise FormatError(
                    f"{where}: head key {name} is named as by an unreleased draft of format 2; this agentfs"
                    " names head keys by the inverted id: push the store to a new URL"
                )
            return keys.head_id_of(name)

        stored = self.stored_run(run)
        checkpoint_id = self.transport.first_name(self.transport.key(*keys.head_dir_key(stored)), "", head_of)
        if checkpoint_id is None:
            return None
        data = self.transport.read(self.transport.key(*keys.head_key(stored, checkpoint_id)), MAX_HEAD)
        if data is None:
            raise RemoteError(f"{where} head key {checkpoint_id} vanished while read")
        head = decode_head(data, stored, checkpoint_id, f"{where} head key {checkpoint_id}")
        self.heads[run] = head
        self.catalogue.load_many(pack_id for pack_id in head.packs if not self.catalogue.has(pack_id))
        return checkpoint_id

    def known_head_id(self, run: str) -> str | None:
        """The run's head as this process last read it (a resume reads it first: no second request), else head_id."""
        head = self.heads.get(run)
        return head.checkpoint_id if head is not None else self.head_id(run)

    def list_objects(self) -> dict[bytes, tuple[float, int]]:
        """Every object in a pack with an index: (when that index was written, the object's frame length)."""
        catalogue = self.catalogue
        catalogue.load_all()
        times = catalogue.pack_times
        objects = ((key, place) for (kind, key), place in catalogue.places.items() if kind == kinds.OBJECT)
        return {key: (times.get(place.pack_id, 0.0), place.length) for key, place in objects}

    def list_all_entries(self) -> list[tuple[str, str]]:
        self.catalogue.load_all()
        found = self.catalogue.ids.items()
        return sorted((run, record_id) for (kind, run), ids in found if kind == kinds.ENTRY for record_id in ids)

    def list_all_records(self, kinds_wanted: tuple[str, ...] = keys.RECORD_NAMES) -> list[tuple[str, str, str]]:
        self.catalogue.load_all()
        names = {code: name for name, code in kinds.KIND_OF.items() if name in kinds_wanted}
        found = self.catalogue.ids.items()
        return sorted((names[kind], run, record_id) for (kind, run), ids in found if kind in names for record_id in ids)


def describe(kind: int, key: bytes) -> str:
    """A record's key as messages name it: run@id, or an object's hex id."""
    if kind in kinds.RUN_KINDS:
        run, record_id = kinds.split_pair_key(key, "")
        return f"{run}@{record_id}"
    return key.hex()


def open_remote(url: str, storage_options: dict[str, Any]) -> PackRemote:
    """For a reader: the remote at `url`, identified: a URL with no agentfs config, or one of another format, is refused."""
    remote = PackRemote(url, storage_options)
    remote.identify()
    return remote
