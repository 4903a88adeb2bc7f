"""The repository: one local directory of append-only segments, locks and remote state (format 2).

The engine's one interface to what is stored; features (core/) and sync (sync/) both build on it,
and the public Store (api.py) holds one (`store.engine`) and adds the features.

The engine API: core/ sees it as core/engine_api.py's EngineAPI, a Protocol of the members below that it uses
(import contracts keep core/ off every other engine module, fsutil and the locks).
"Durable" means it survives power loss once the call returns, with durability="power" (with
"process", a killed process only).

- entries: `append_entry` (whole, durable, never replaces; carries the commit's object records in
  its one batch), `has_entry`, `read_entry` (verified, cached, fetched from a remote if missing),
  `local_entry` (raw bytes here only), `cache_entry`, `head`, `heads` (this process's hint), `ids`,
  `local_ids`, `local_runs`, `local_entries`. From a remote: `install_entry` (verified; with
  `replace=`, a repair of a damaged local copy).
- records (JOURNAL_RECORDS, RETIRED_RECORDS): `append_record` (whole, durable, never replaces), `record_ids`,
  `poll_record_ids`, `read_record`, `record_size`, `local_records`, `retirements`, and
  `make_records_durable` for records another process wrote and may have left unsynced.
- retention and forks: `retire` (a durable retirement record: the index then hides what it names),
  `note_fork` (durable before the fork's entry), `forks_of`.
- locks: `appending(run)` around one append to a run's log, `journal_lock(run)`, `writing()`
  (shared, by every commit), `excluding_writers()` (exclusive: prune and gc).
- config: `read_config`, `rewrite_config` (durable, under the config lock).
- objects: `db` (an ObjectStore; new objects through ObjectWriter), `pool`.
- `where_stored` names where an entry or record lies, for messages; `writer()`, `id`, `source`.
- for core: `readable`, `run_parents`, `run_heads`, `damaged_entries` (engine/lineage.py), `fork_relations`,
  `object_writer()`, `watcher(run, on_hint)` (engine/notify.py).
- for sync: `remote_state_dir(name)` and `remote_state_names()` (a remote's private state: caches,
  not truth), `repair_record` (a damaged local record gets a verified copy beside it), `watched_dir()`
  (every commit makes a file-system event under it: a hint, never the truth).
"""

from __future__ import annotations

import logging
import os
import socket
from collections import OrderedDict
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol, TypeVar

from ..aio import Offloader
from ..errors import FormatError, IntegrityError, NotFound, RetirementRefused, StoreClosed
from ..format import keys, kinds
from ..format import segment as fmt
from ..format.config import ENCRYPTED_HASH, GROUPS_FROM, check_store_config, encode_config, encrypted, encryption_config, new_config
from ..format.crypto import Sealer, new_master
from ..format.crypto import key_id as crypto_key_id
from ..format.entries import Entry, decode_entry_at
from ..format.journal import decode_record
from ..format.keys import RETIRED_RECORDS
from ..format.lineage import EntryParent, Parent
from ..format.refs import EntryAddress
from ..format.retirement import Retirement, decode_retirement, encode_retirement
from ..fsutil import make_dirs, trust_above, write_atomic
from . import lineage
from .index import IdSlice
from .keyslots import Encryption, Unlocked, new_slot, read_slots, unlock, write_slot
from .locks import EXCLUSIVE, flock
from .notify import Watcher
from .object_store import ObjectStore, ObjectWriter
from .segment_store import SegmentStore
from .segment_writer import DURABILITY, Durability

HOST = socket.gethostname()
log = logging.getLogger("agentfs")

ENTRY_CACHE = 256
DECODE: dict[int, Callable[[bytes, str, str, str], object]] = {  # the check a record's body must pass
    kinds.ENTRY: decode_entry_at,
    kinds.JOURNAL: decode_record,
    kinds.RETIRED: decode_retirement,
}
R = TypeVar("R", bound="Repository")
T = TypeVar("T")
__all__ = ["DURABILITY", "Durability", "Repository", "Source"]


class Source(Protocol):
    """Where a store fetches what it lacks: a remote, read as untrusted."""

    @property
    def url(self) -> str: ...
    def fetch_entry(self, run: str, checkpoint_id: str) -> bytes | None: ...
    def fetch_object(self, oid: bytes) -> bytes | None: ...
    def list_ids(self, run: str, kind: str = ...) -> list[str]: ...
    def fetch_record(self, kind: str, run: str, record_id: str) -> bytes | None: ...
    def head_id(self, run: str) -> str | None: ...
    def list_runs(self) -> list[str]: ...
    def list_journal(self, run: str) -> list[str]: ...
    def fetch_journal(self, run: str, record_id: str) -> bytes | None: ...
    def attach(self, store: Repository) -> None: ...
    def check_retirement(self, record: Retirement) -> None: ...


class _Pool(ThreadPoolExecutor):
    """The store's thread pool: work submitted once the store closed raises StoreClosed, not a bare RuntimeError."""

    def __init__(self, root: Path, **options: Any) -> None:
        super().__init__(**options)
        self.root = root

    def submit(self, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> Future[T]:
        try:
            return super().submit(fn, *args, **kwargs)
        except RuntimeError as exc:  # "cannot schedule new futures after shutdown"
            raise StoreClosed(f"the agentfs store {self.root} is closed") from exc


def _read_config(path: Path) -> dict[str, Any]:
    """The store's config file, read and checked (format/config.py checks, without I/O)."""
    return check_store_config(path.read_bytes(), str(path), str(path.parent))


class Repository(SegmentStore):
    """A local agentfs store's storage. Safe to share between threads and between processes."""

    def __init__(
        self,
        root: Path,
        *,
        durability: Durability = "power",
        source: Source | None = None,
        encryption: Encryption | None = None,
        adopt: Unlocked | None = None,
    ) -> None:
        """`encryption`: how to unlock an encrypted store, or, for a new one, to make it encrypted (a store
        that is encrypted unlocks from the environment without it); `adopt`: a new store takes this
        master key and these slots (those of the encrypted remote it is opened with)."""
        if durability not in DURABILITY:
            raise ValueError(f"durability must be one of {DURABILITY}, got {durability!r}")
        if (root.exists() and not root.is_dir()) or any(parent.is_file() for parent in root.parents):
            raise FormatError(f"{root} is not a directory: not an agentfs store")
        self.root = root
        self.sync_writes = durability == "power"
        config, sealer = self._open_config(encryption, adopt)
        field = encrypted(config)
        super().__init__(root, durability, sealer, group_records=field is not None and field["format"] >= GROUPS_FROM)
        self.config = config
        self.source = source
        self.db = ObjectStore(self.index, self._append, self.make_durable, sync_writes=self.sync_writes, hasher=self.hasher)
        if source is not None:
            source.attach(self)
            self.db.fetch = source.fetch_object
        self._entries: OrderedDict[EntryAddress, Entry] = OrderedDict()
        self.heads: dict[str, str] = {}  # run -> the last id this process appended: a hint, not the truth
        self._retirements_fetched: set[str] = set()  # runs whose remote retirement records this process has fetched
        self._pool: ThreadPoolExecutor | None = None
        self.offload = Offloader()  # runs the blocking work of the async twins (aio.py)

    def _open_config(self, encryption: Encryption | None, adopt: Unlocked | None) -> tuple[dict[str, Any], Sealer | None]:
        """Read the config (and unlock an encrypted store), creating the store first if needed.

        The config is published before any other directory: creation killed midway, or raced by
        another process, leaves either no config (and only the store's own names) or a complete one.
        An encrypted store's key slots are made durable before its config names their key.
        """
        root = self.root
        config_path, tmp_dir = root / keys.CONFIG, root / keys.TMP
        created = False
        layout = (root / keys.SEGMENTS, root / keys.LOCKS, tmp_dir, root / keys.REMOTES)
        if self.sync_writes:
            trust_above(root)
        if not config_path.is_file():
            own = {path.name for path in layout} | {keys.CONFIG, keys.KEY_SLOTS}  # config: another process just created the store
            if root.exists() and any(p.name not in own for p in root.iterdir()):
                raise FormatError(f"{root} exists, is not empty and has no agentfs config: not an agentfs store")
            segments_dir = root / keys.SEGMENTS
            if segments_dir.is_dir() and any(segments_dir.iterdir()):
                # creation publishes the config first: segments without one are a store whose config was lost,
                # and a new config would give it a new id and drop its retention policy
                raise FormatError(
                    f"{root} holds segments but no config: its config was lost. Restore {config_path} from a backup "
                    f"(or a copy of this store), or move {segments_dir} aside to start an empty store; agentfs will not "
                    "create a new store over existing segments"
                )
            make_dirs(tmp_dir, sync=self.sync_writes)
            fresh = new_config()
            if adopt is not None or encryption is not None:
                master = adopt.master if adopt is not None else new_master()
                slots = adopt.slots if adopt is not None else [new_slot(master, encryption or Encryption(), label="init")]
                for slot in slots:
                    write_slot(root, tmp_dir, slot, sync=self.sync_writes)
                fresh.update(hash=ENCRYPTED_HASH, encryption=encryption_config(crypto_key_id(master)))
            created = write_atomic(tmp_dir, config_path, encode_config(fresh), sync=self.sync_writes)  # loses a race quietly
        config = _read_config(config_path)
        for path in layout:
            make_dirs(path, sync=self.sync_writes)
        if created:  # the fixed set of locks, so that no commit creates one (flock would, and need not sync it)
            for name in [*(keys.stripe_name(kind, n) for kind in ("run", "journal") for n in range(keys.STRIPES)), "gc", "config"]:
                (root / keys.LOCKS / name).touch()
        field = encrypted(config)
        if field is None:
            if (encryption is not None or adopt is not None) and not created:
                raise FormatError(f"{root} is a plaintext store: copy it to an encrypted one with 'agentfs copy --encrypt {root} DEST'")
            return config, None
        if adopt is not None and crypto_key_id(adopt.master) == field["key_id"]:
            return config, Sealer(adopt.master)
        return config, Sealer(unlock(read_slots(root), field["key_id"], encryption, str(root)))

    @property
    def id(self) -> str:
        return str(self.config["store_id"])

    @property
    def pool(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:  # made again after close: a checkpoint of a closed store still reads lazily
                self._pool = _Pool(self.root, max_workers=4, thread_name_prefix="agentfs-io")
            return self._pool

    def close(self) -> None:
        """Close the store, from any thread at any time: writes in flight finish first (others then raise
        StoreClosed), and every descriptor is closed. No lock is held while waiting (see stop_writes)."""
        self.stop_writes()
        self.offload.close()  # the calls it still runs may use the pool
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True)  # outside the lock: its threads may take it
        self.close_segments()

    def __enter__(self: R) -> R:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<agentfs.Store {str(self.root)!r}>"

    # runs and their entries

    def runs(self) -> list[str]:
        """Names of every run with at least one checkpoint (here or on the remote)."""
        names = set(self.local_runs())
        if self.source is not None:  # a run retention removed whole on another machine is not listed
            names.update(run for run in set(self.source.list_runs()) - names if self.ids(run))
        return sorted(names)

    def writer(self) -> dict[str, Any]:
        """Who writes a record: this store, host and process."""
        return {"store": self.id, "host": HOST, "pid": os.getpid()}

    def head(self, run: str) -> str | None:
        """The greatest id of the run: its head."""
        self.refresh_index()
        local = self.index.head(run)
        if self.source is None:
            return local
        remote = self.source.head_id(run)
        retired = self.retired_ids(run)
        if remote in retired:  # retired on another machine: the newest id it kept instead
            remote = max(set(self.source.list_ids(run)) - retired, default=None)
        return max(filter(None, [local, remote]), default=None)

    def ids(self, run: str) -> list[str]:
        local = self.local_ids(run)  # sorted already
        if self.source is None:
            return local
        # the remote lists only names that are ULIDs; those pruned here stay on it until its gc
        return sorted(set(local) | (set(self.source.list_ids(run)) - self.retired_ids(run)))

    def id_slice(self, run: str, start: int | None = None, stop: int | None = None) -> IdSlice:
        """`ids(run)[start:stop]` and the run's checkpoint count. Local: the slice's cost, not the run's (the index
        keeps each run's ids sorted); with a remote source, every id is listed."""
        if self.source is None:
            self.refresh_index()
            return self.index.id_slice(kinds.ENTRY, run, start, stop)
        ids = self.ids(run)
        first, last, _step = slice(start, stop).indices(len(ids))
        return IdSlice(len(ids), first, ids[first:last])

    def has_entry(self, run: str, checkpoint_id: str) -> bool:
        """Whether this store holds the entry now (never asks a remote)."""
        self.index.refresh()  # another process may have retired it since this process looked
        return self.index.has(kinds.ENTRY, run, checkpoint_id)

    @property
    def index_generation(self) -> int:
        """Changes when this process's index is rebuilt (a compaction moved records): what it located before may be gone."""
        return self.index.generation

    def knew_entry(self, run: str, checkpoint_id: str) -> bool:
        """Whether the entry was here at this process's last look (no refresh: another process may have retired it since)."""
        return self.index.has(kinds.ENTRY, run, checkpoint_id)

    def known_head(self, run: str) -> str | None:
        """The greatest local id of the run at this process's last look (no refresh): after one refresh_index(), a
        reader's several lookups cost no further look at the segments and see every append made before that look."""
        return self.index.head(run)

    def known_ids(self, run: str) -> list[str]:
        """The ids of the run's local entries at this process's last look, oldest first (no refresh; see known_head)."""
        return self.index.ids(kinds.ENTRY, run)

    def _body(self, kind: int, run: str, record_id: str) -> tuple[bytes, str] | None:
        """(a record's body, where it lies) or None. Of several copies (a repair), one that decodes;
        IntegrityError if every copy's frame is damaged."""
        location = self._location(kind, run, record_id)
        if location is None:
            return None
        where = self.index.where(location)
        check = DECODE[kind]
        try:
            body = self.index.read_body(kind, kinds.pair_key(run, record_id), location, lambda data: check(data, run, record_id, where))
            return body, where
        except NotFound:
            return None  # compacted away meanwhile, and dropped: retired

    def local_entry(self, run: str, checkpoint_id: str) -> bytes | None:
        """The entry's bytes as stored here, unverified but for its frame; None if there is none."""
        found = self._body(kinds.ENTRY, run, checkpoint_id)
        return None if found is None else found[0]

    def read_entry(self, run: str, checkpoint_id: str) -> Entry:
        key = (run, checkpoint_id)
        with self._lock:
            cached = self._entries.get(key)
            if cached is not None:
                self._entries.move_to_end(key)
                return cached
        where = f"{run}@{checkpoint_id}"
        try:
            found = self._body(kinds.ENTRY, run, checkpoint_id)
            if found is None:
                entry = self._fetch_entry(run, checkpoint_id)
            else:
                entry = decode_entry_at(found[0], run, checkpoint_id, f"{where} ({found[1]})", self.hasher)
        except (FormatError, IntegrityError):
            if self.source is None:
                raise
            # a damaged local copy and a remote: its copy, verified, is appended and read from now on (repair)
            entry = self._fetch_entry(run, checkpoint_id, replace=True)
            log.warning("checkpoint %s was damaged in %s: repaired from the remote", where, self.root)
        self.cache_entry(key, entry)
        return entry

    def forget(self, run: str, checkpoint_ids: list[str]) -> None:
        """Drop removed checkpoints from this process's caches."""
        with self._lock:
            for checkpoint_id in checkpoint_ids:
                self._entries.pop((run, checkpoint_id), None)
            if self.heads.get(run) in checkpoint_ids:
                del self.heads[run]

    def cache_entry(self, key: EntryAddress, entry: Entry) -> None:
        with self._lock:
            self._entries[key] = entry
            if len(self._entries) > ENTRY_CACHE:
                self._entries.popitem(last=False)

    def _fetch_entry(self, run: str, checkpoint_id: str, *, replace: bool = False) -> Entry:
        if self.source is not None and checkpoint_id in self.retired_ids(run):
            raise NotFound(f"checkpoint {checkpoint_id} of run {run!r} was retired by retention")
        data = self.source.fetch_entry(run, checkpoint_id) if self.source is not None else None
        if data is None:
            raise NotFound(f"checkpoint {checkpoint_id} not found in run {run!r}")
        entry = decode_entry_at(data, run, checkpoint_id, f"remote {run}@{checkpoint_id}", self.hasher)
        self.install_entry(run, checkpoint_id, data, entry, replace=replace)
        return entry

    def install_entry(self, run: str, checkpoint_id: str, data: bytes, entry: Entry, *, replace: bool = False) -> bool:
        """Add an entry verified as `entry` (from a remote). Entries are never replaced, but with `replace`:
        a local copy found damaged gets a verified copy appended beside it, which reads then prefer (repair)."""
        sources = {source for source, _id in entry.borrowed()}  # a fork, or an Artifact of another run reused
        if entry.manifest.forked_from is not None:
            sources.add(entry.manifest.forked_from[0])
        for source in sorted(sources - {run}):
            self.note_fork(source, run)
        with self._lock:
            self._entries.pop((run, checkpoint_id), None)
        if replace:
            self._append([fmt.Record(kinds.ENTRY, kinds.pair_key(run, checkpoint_id), data)], True)
            return True
        with self.appending(run):
            return self.append_entry(run, checkpoint_id, data)

    def append_entry(
        self,
        run: str,
        checkpoint_id: str,
        data: bytes,
        *,
        objects: Sequence[fmt.Record] = (),
        relies_on: Iterable[EntryAddress] = (),
        refreshed: bool = False,
        parent: Parent | None = None,
    ) -> bool:
        """Add an entry whole, with the commit's new `objects`, as one batch; False if the run already has it.

        Call with appending(run) held. `relies_on`: entries the new one names (its parent, those it
        borrows from), made durable first. Durable when it returns (durability="power": one
        fdatasync); a crash midway leaves no entry, at worst a torn tail that readers ignore.
        `refreshed`: the caller refreshed the index with appending(run) held (it read the head there),
        so no other writer can have added this run's entry since. `parent`: the parent the entry's manifest names,
        kept by the writer for the LINEAGE record of the segment's seal (None: not known, the seal writes none for the run).
        """
        for location in relies_on if self.sync_writes else ():  # make_durable does nothing without syncs
            found = self.index.location(kinds.ENTRY, *location)
            if found is not None:
                self.make_durable(found)
        if not refreshed:
            self.index.refresh()
        if self.index.has(kinds.ENTRY, run, checkpoint_id):
            return False
        key = kinds.pair_key(run, checkpoint_id)
        parents = None if parent is None else {key: EntryParent(run, parent.id)}
        self._append_batch([*objects, fmt.Record(kinds.ENTRY, key, data)], True, parents)
        return True

    def read_packed(self, oid: bytes, location: EntryAddress) -> bytes:
        return self.read_entry(*location).packed(oid, f"log entry {location[0]}@{location[1]}")

    # for core/ (core/engine_api.py names all it uses): a run's shape (engine/lineage.py), new objects, change hints

    def readable(self, run: str, checkpoint_id: str) -> Entry | None:
        """The entry; None (logged) if the local copy is damaged or was pruned since it was listed (lineage.readable)."""
        return lineage.readable(self, run, checkpoint_id)

    def run_parents(self, run: str, ids: list[str]) -> dict[str, str | None]:
        """Checkpoint id -> its parent, for each of `ids` that can be read (lineage.parents)."""
        return lineage.parents(self, run, ids)

    def run_entries(self, run: str, ids: list[str]) -> list[Entry]:
        """The entries of `ids`, as read_entry reads each, swept (lineage.entries)."""
        return lineage.entries(self, run, ids)

    def run_heads(self, run: str, ids: list[str]) -> list[str]:
        """Ids among `ids` (the run's, oldest first) where a line of the run ends (lineage.heads)."""
        return lineage.heads(self, run, ids)

    def damaged_entries(self, run: str, ids: list[str]) -> list[tuple[str, str]]:
        """(id, why) of each entry among `ids` that cannot be read (lineage.damaged)."""
        return lineage.damaged(self, run, ids)

    def fork_relations(self) -> list[tuple[str, str]]:
        """(source, target) of every fork noted here (note_fork), sorted."""
        self.index.refresh()
        return sorted((source, target) for source, targets in self.index.forks.items() for target in targets)

    def object_writer(self) -> ObjectWriter:
        """A writer of one commit's new objects (loose ones written on the pool; see ObjectWriter)."""
        return ObjectWriter(self.db, self.pool)

    def watcher(self, run: str | None = None, on_hint: Callable[[], None] | None = None) -> Watcher:
        """Reports each local checkpoint of `run` (default: every run) committed from now on (engine/notify.py)."""
        return Watcher(self, run, on_hint)

    # for sync

    def remote_state_dir(self, name: str) -> Path:
        """remotes/<name>/, made if missing: one remote's private sync state (caches, not truth)."""
        directory = self.remotes_dir / name
        make_dirs(directory, sync=False)
        return directory

    def remote_state_names(self) -> list[str]:
        """The names of the remotes with a state directory here."""
        return sorted(p.name for p in self.remotes_dir.iterdir() if p.is_dir()) if self.remotes_dir.is_dir() else []

    # journal and retirement records

    def append_record(self, run: str, kind: str, record_id: str, data: bytes) -> bool:
        """Add a JOURNAL_RECORDS or RETIRED_RECORDS record whole, never replacing one: False if it exists. Durable as append_entry."""
        self.index.refresh()
        if self.index.has(kinds.KIND_OF[kind], run, record_id):
            return False
        self._append([fmt.Record(kinds.KIND_OF[kind], kinds.pair_key(run, record_id), data)], True)
        return True

    def read_record(self, run: str, kind: str, record_id: str) -> bytes | None:
        """A record's bytes, unverified but for its frame; None if it is gone (retired since it was listed)."""
        found = self._body(kinds.KIND_OF[kind], run, record_id)
        return None if found is None else found[0]

    def make_records_durable(self, run: str, kind: str, record_ids: list[str]) -> None:
        """Make records durable whoever wrote them (see make_durable), before they are returned."""
        for record_id in record_ids:
            location = self._location(kinds.KIND_OF[kind], run, record_id)
            if location is not None:
                self.make_durable(location)

    def retirements(self, run: str) -> list[Retirement]:
        """The run's retirement records: what retention removed from it on purpose.

        With a remote, its records for `run` are fetched (verified) first, once per process: a run's
        ids and head are not trusted before the remote's retirements are known.
        """
        if self.source is not None and run not in self._retirements_fetched:
            self._fetch_retirements(run)
        found = []
        for record_id in self.record_ids(run, RETIRED_RECORDS):
            body = self._body(kinds.RETIRED, run, record_id)
            if body is not None:
                found.append(decode_retirement(body[0], run, record_id, f"{run} retired/{record_id} ({body[1]})"))
        return found

    def _fetch_retirements(self, run: str) -> None:
        assert self.source is not None
        for record_id in sorted(set(self.source.list_ids(run, RETIRED_RECORDS)) - set(self.record_ids(run, RETIRED_RECORDS))):
            data = self.source.fetch_record(RETIRED_RECORDS, run, record_id)
            if data is None:
                continue  # removed by a remote gc since it was listed
            record = decode_retirement(data, run, record_id, f"remote {run} retired/{record_id}")
            try:
                self.source.check_retirement(record)  # a remote retires only what it holds or held (sync/authority.py)
            except RetirementRefused:
                continue  # reported by the remote, kept for `agentfs status`
            self.append_record(run, RETIRED_RECORDS, record_id, data)
        self._retirements_fetched.add(run)

    def retired_ids(self, run: str) -> set[str]:
        """Checkpoint ids of `run` that retention removed on purpose."""
        return {cid for record in self.retirements(run) for cid in record.checkpoints}

    def retire(self, record: Retirement) -> None:
        """Remove what `record` names from its run: a durable retirement record, which the index of
        every process then applies (hides the checkpoints and journal records it names), and this
        process's cache of them. Call with excluding_writers() held; compaction drops them later."""
        self.append_record(record.run, RETIRED_RECORDS, record.id, encode_retirement(record, self.writer()))
        self.forget(record.run, record.checkpoints)

    # forks: the only way a run's entries borrow from another run's

    def note_fork(self, source: str, target: str) -> None:
        """Record, durably and before the fork's entry exists, that `target` may borrow from `source`."""
        self.index.refresh()
        if target not in self.index.forks.get(source, ()):
            self._append([fmt.Record(kinds.FORK, kinds.pair_key(source, target), b"")], True)

    def forks_of(self, run: str) -> set[str]:
        """Runs forked from `run`, and from those, and so on: every run that may borrow from it."""
        self.index.refresh()
        found: set[str] = set()
        todo = [run]
        while todo:
            names = self.index.forks.get(todo.pop(), set())
            todo.extend(names - found - {run})
            found |= names
        found.discard(run)
        return found

    # config

    def read_config(self) -> dict[str, Any]:
        """The config as stored now (another process may have changed it since this store opened)."""
        return _read_config(self.root / keys.CONFIG)

    def rewrite_config(self, change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
        """Apply `change` to the config as stored now and replace it, under the config lock (two
        writers would each drop the other's fields); durable when it returns. The new config."""
        with flock(self.root.joinpath(*keys.CONFIG_LOCK), EXCLUSIVE):
            config = self.read_config()
            change(config)
            write_atomic(self.tmp_dir, self.root / keys.CONFIG, encode_config(config), sync=self.sync_writes, exclusive=False)
        self.config = config
        return config
