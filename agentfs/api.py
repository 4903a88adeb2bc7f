"""The Store facade and open(): the only module that joins the features (core/) and sync (sync/)."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

from .core import retention
from .core.run import Run
from .core.schema import Schema
from .core.stats import LocalStats, local_stats
from .core.store_copy import CopyReport
from .core.store_copy import copy_store as copy_engine
from .core.watch import AsyncWatch, Watch, watch
from .engine import maintenance
from .engine.keyslots import PASSWORD_ENV as PASSWORD_ENV  # re-exported: the CLI's passphrase prompt names it
from .engine.keyslots import PASSWORD_FILE_ENV as PASSWORD_FILE_ENV  # (the front-ends import the public API, pyproject)
from .engine.keyslots import Encryption, EncryptionArg, StoreKeys, Unlocked, as_encryption, unlock
from .engine.maintenance import GcReport, VerifyReport
from .engine.maintenance import Problem as Problem  # re-exported: `agentfs verify` adds problems to a report
from .engine.repository import Durability, Repository, Source
from .errors import NotFound
from .format import keys
from .format.config import encrypted
from .names import check_name
from .sync.daemon import SyncDaemon
from .sync.pack_remote import open_remote
from .sync.status import RemoteStats, remote_stats

P = ParamSpec("P")
T = TypeVar("T")
STORE_ENV = "AGENTFS_STORE"  # the store agentfs.open() and the CLI use when given no path
DEFAULT_STORE = ".agentfs"


@dataclasses.dataclass
class StoreStats(LocalStats):
    """store.stats(): the local figures, and each remote's sync state."""

    remotes: list[RemoteStats]


class Store:
    """A local agentfs store. Safe to share between threads and between processes.

    Open one with `agentfs.open()`; use it as a context manager, or `close()` it. The store holds its
    storage engine (`engine`, an `agentfs.engine.repository.Repository`) rather than being one, so this
    class lists the user API only; the engine's methods are for agentfs's own layers.
    """

    def __init__(
        self,
        root: Path,
        *,
        durability: Durability = "power",
        source: Source | None = None,
        encryption: Encryption | None = None,
        adopt: Unlocked | None = None,
    ) -> None:
        """The store at `root`, created if missing; prefer `agentfs.open()`, which takes the same choices."""
        self.engine = Repository(root, durability=durability, source=source, encryption=encryption, adopt=adopt)

    @property
    def root(self) -> Path:
        """The store's directory."""
        return self.engine.root

    @property
    def id(self) -> str:
        """The store's id: chosen at creation, kept by copies and clones of it."""
        return self.engine.id

    @property
    def remote(self) -> str | None:
        """The URL of the remote this store was opened with (`agentfs.open(path, remote=URL)`), from which it fetches
        what it lacks; None for a store opened without one."""
        source = self.engine.source
        return None if source is None else source.url

    def run(self, name: str, *, schema: Schema | None = None) -> Run:
        """The run `name`; with `schema`, commits record its version and older checkpoints load migrated."""
        return Run(self.engine, check_name(name, "run"), schema)

    def runs(self) -> list[str]:
        """Names of every run with at least one checkpoint (here or on the remote)."""
        return self.engine.runs()

    def verify(self, *, progress: Callable[[int, int], None] | None = None) -> VerifyReport:
        """Re-hash every object and check every record and closure; `progress(done, total)`: object bytes re-hashed."""
        return maintenance.verify(self.engine, progress)

    def gc(self, grace: float = 3600.0, *, policy: bool = True) -> GcReport:
        """Apply the retention policy in config (unless `policy=False`), then delete unreferenced objects
        last touched over `grace` seconds ago."""
        pruned = retention.apply_policy(self.engine) if policy else []
        report = maintenance.gc(self.engine, grace)
        report.pruned = sum(len(p.removed) for p in pruned)
        return report

    def set_retention(self, keep_last: int | None = None, keep_within: timedelta | float | None = None) -> dict[str, Any] | None:
        """Store-wide retention that `gc` applies to every run (LangGraph threads and Strands sessions excepted); no argument clears it."""
        return retention.set_policy(self.engine, keep_last, keep_within)

    def retention(self) -> dict[str, Any] | None:
        """The store-wide retention policy gc applies (`{"keep_last": ..., "keep_within": seconds}`, as set by
        `set_retention`), read from the config now; None if there is none."""
        return retention.policy(self.engine)

    def watch(self, run: str | None = None, *, timeout: float | None = None) -> Watch:
        """Yield checkpoints of `run` (default: every run) as any process commits them, oldest first.

        Starts from now: checkpoints already committed are not yielded. Stops after `timeout`
        seconds without a new checkpoint (default: never). Watching starts at this call; `close()`
        (or leaving a `with store.watch() as changes:` block) stops it.
        """
        return watch(self.engine, run, timeout=timeout)

    def stats(self) -> StoreStats:
        """Checkpoints and bytes per run, dedup ratio, journal size, sync lag per remote."""
        local = local_stats(self.engine)
        remotes = remote_stats(self.engine, self.engine.local_entries())
        return StoreStats(local.runs, local.objects, local.object_bytes, remotes)

    def sync(self, url: str, storage_options: dict[str, Any] | None = None, **options: Any) -> SyncDaemon:
        """Start a background thread that pushes every commit to `url`; use it as a context manager."""
        daemon = SyncDaemon(self.engine, url, storage_options or {}, **options)
        daemon.start()
        return daemon

    @property
    def keys(self) -> StoreKeys:
        """The key slots of an encrypted store (what `agentfs key add/remove/passwd` change): `master` (None for a
        plaintext store), `slots()`, `new_slot(encryption)`, `add(slot)`, `remove(slot_id)`."""
        return StoreKeys(self.engine.root, self.engine.tmp_dir, self.engine.sealer, sync=self.engine.sync_writes)

    def close(self) -> None:
        """Close the store, from any thread at any time: writes in flight finish first (others then raise
        StoreClosed), and every descriptor is closed."""
        self.engine.close()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return repr(self.engine)

    # async twins (aio.py): the same calls, run off the event loop

    async def to_thread(self, fn: Callable[P, T], /, *args: P.args, **kwargs: P.kwargs) -> T:
        """`await store.to_thread(fn, *args, **kwargs)`: asyncio.to_thread on this store's bounded pool, for async
        code that makes several blocking store calls in one hop (the `a` methods use the same pool: at most 4
        calls of one store run at once, the rest wait their turn). Cancelling the awaiting task does not stop a
        call that has started: it runs to its end."""
        return await self.engine.offload(fn, *args, **kwargs)

    async def aruns(self) -> list[str]:
        """runs() for async code."""
        return await self.engine.offload(self.runs)

    async def averify(self) -> VerifyReport:
        """verify() for async code."""
        return await self.engine.offload(self.verify)

    async def agc(self, grace: float = 3600.0, *, policy: bool = True) -> GcReport:
        """gc() for async code."""
        return await self.engine.offload(self.gc, grace, policy=policy)

    async def aset_retention(self, keep_last: int | None = None, keep_within: timedelta | float | None = None) -> dict[str, Any] | None:
        """set_retention() for async code."""
        return await self.engine.offload(self.set_retention, keep_last, keep_within)

    async def astats(self) -> StoreStats:
        """stats() for async code."""
        return await self.engine.offload(self.stats)

    def awatch(self, run: str | None = None, *, timeout: float | None = None) -> AsyncWatch:
        """`async for cp in store.awatch(run)`: watch() for async code; no thread waits while it waits.

        Watching starts at the first `__anext__` (or on entering `async with store.awatch() as changes:`).
        """
        return AsyncWatch(self.engine, None if run is None else check_name(run, "run"), timeout)

    def async_sync(self, url: str, storage_options: dict[str, Any] | None = None, **options: Any) -> SyncDaemon:
        """`async with store.async_sync(url) as daemon:` sync() for async code: starts on entry, drains on exit."""
        return SyncDaemon(self.engine, url, storage_options or {}, **options)


def copy_store(source: Store, dest: Store) -> CopyReport:
    """Copy every run of `source` into `dest`, a new empty store, keeping ids, parents, forks, journals and the
    retention policy; the bytes are written again under `dest`'s keys (`agentfs copy`, core/store_copy.py)."""
    return copy_engine(source.engine, dest.engine)


def open_store(
    path: str | os.PathLike[str] | None = None,
    *,
    create: bool = True,
    remote: str | None = None,
    storage_options: dict[str, Any] | None = None,
    durability: Durability = "power",
    encryption: EncryptionArg = None,
) -> Store:
    """Open the store at `path` (default: $AGENTFS_STORE, else ./.agentfs), creating it if missing;
    with `create=False`, a missing store raises NotFound naming the path (a misspelt path creates nothing).
    With `remote`, fetch what it lacks from there.

    `encryption`: an `agentfs.Encryption` (passphrase or key file), a passphrase str, or True (the
    passphrase from AGENTFS_PASSWORD or AGENTFS_PASSWORD_FILE). A new store is then created encrypted;
    an existing encrypted store is unlocked with it (without it, from the environment); a wrong one
    raises `WrongKey`."""
    root = store_root(path)
    if not create and not (root / keys.CONFIG).is_file():
        raise NotFound(f"no agentfs store at {root} (create one with agentfs.open(path) or `agentfs init`, or set ${STORE_ENV})")
    source = None if remote is None else open_remote(remote, storage_options or {})  # a typo'd remote is refused here
    unlock_with = as_encryption(encryption)
    adopt = None
    field = None if source is None else encrypted(source.config or {})
    if source is not None and field is not None and not (root / keys.CONFIG).is_file():  # a new store takes the remote's key
        slots = source.key_slots()
        adopt = Unlocked(unlock(slots, field["key_id"], unlock_with, f"remote {source.url}"), slots)
    return Store(root, durability=durability, source=source, encryption=unlock_with, adopt=adopt)


def store_root(path: str | os.PathLike[str] | None = None) -> Path:
    """The store's directory: `path`, else $AGENTFS_STORE, else ./.agentfs (as the CLI finds it)."""
    return Path(path if path is not None else os.environ.get(STORE_ENV) or DEFAULT_STORE).absolute()
