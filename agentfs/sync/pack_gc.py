"""Remote gc on a format-2 remote: repack (docs/FORMAT.md, "Remote gc").

Under remote_gc's marker rule, after its plan: every pack holding a record the plan deletes is
rewritten. Its other records go, byte-identical, into a new pack, whose index is put before the old
pack's index is deleted, and the old pack last: a reader always finds each live record in a pack
with an index, and one that read the old index finds the pack gone and looks again (pack_remote.py).
Head keys name packs only as hints, so they stay valid.
"""

from __future__ import annotations

import dataclasses
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

from tqdm import tqdm

from ..errors import AgentFSError, RemoteError
from ..format import keys
from ..format.pack import encode_pack
from ..format.segment import Record, decode_record
from .pack_remote import PackRemote

Key = tuple[int, bytes]  # a record's kind and key
IN_FLIGHT = 4  # packs read whole and rewritten at once


@dataclasses.dataclass
class Repack:
    deleted: list[str] = dataclasses.field(default_factory=list)  # packs removed
    made: list[str] = dataclasses.field(default_factory=list)  # packs holding their live records
    bytes_freed: int = 0
    skipped: list[str] = dataclasses.field(default_factory=list)  # packs left whole: a live record in them is damaged


def packs_holding(remote: PackRemote, doomed: set[Key]) -> list[str]:
    """The packs (with an index this remote has read) that hold any of the `doomed` records."""
    return sorted(pack_id for pack_id, frames in remote.catalogue.pack_frames().items() if any((f.kind, f.key) in doomed for f in frames))


def repack(
    remote: PackRemote,
    pack_ids: list[str],
    doomed: set[Key],
    writer: bytes,
    pool: ThreadPoolExecutor,
    stop_at: float,
    *,
    progress: bool = False,
) -> Repack:
    """Rewrite each pack of `pack_ids` without the `doomed` records; nothing is deleted after `stop_at`. Packs are
    read whole, IN_FLIGHT at once (memory: about 3 x IN_FLIGHT x a pack's size)."""
    report = Repack()
    sizes = {pack_id: sum(frame.length for frame in remote.catalogue.pack_frames().get(pack_id, [])) for pack_id in pack_ids}
    shown = progress and sys.stderr.isatty()
    bar = tqdm(total=sum(sizes.values()), unit="B", unit_scale=True, desc=f"gc {remote.url}: repacking", disable=not shown)
    slots = threading.BoundedSemaphore(IN_FLIGHT)

    def one(pack_id: str) -> tuple[str, list[str], int]:
        with slots:
            done = _repack_one(remote, pack_id, doomed, writer, stop_at)
        bar.update(sizes[pack_id])
        return done

    with bar:
        results = list(pool.map(one, pack_ids))
    for result in results:
        pack_id, made, freed = result
        if freed < 0:
            report.skipped.append(pack_id)
            continue
        report.deleted.append(pack_id)
        report.made.extend(made)
        report.bytes_freed += freed
    return report


def _repack_one(remote: PackRemote, pack_id: str, doomed: set[Key], writer: bytes, stop_at: float) -> tuple[str, list[str], int]:
    """(pack id, the new pack's id if any, bytes freed; -1 if the pack was left whole)."""
    key = remote.transport.key(*keys.pack_key(pack_id))
    with remote.transport.failing(f"read {key}"):
        data = bytes(remote.transport.fs.cat_file(key))
    frames = remote.catalogue.pack_frames().get(pack_id, [])
    live: list[Record] = []
    for frame in frames:
        if (frame.kind, frame.key) in doomed:
            continue
        try:
            live.append(decode_record(data[frame.offset : frame.offset + frame.length], f"remote {remote.url} pack {pack_id}"))
        except AgentFSError:
            return pack_id, [], -1  # it cannot be copied: the pack stays, `verify --remote` reports it
    made: list[str] = []
    freed = len(data)
    if live:
        pack = encode_pack(live, writer)
        remote.transport.create(remote.transport.key(*keys.pack_key(pack.pack_id)), pack.data)
        remote.transport.create(remote.transport.key(*keys.pack_index_key(pack.pack_id)), pack.footer)
        remote.catalogue.learn(pack.pack_id, pack.entries)
        made.append(pack.pack_id)
        freed -= len(pack.data)
    for old in (remote.transport.key(*keys.pack_index_key(pack_id)), key):  # the index first: no reader is sent to a missing pack
        if time.time() > stop_at:
            raise RemoteError(f"remote gc of {remote.url} passed its deadline; the rest is left for the next gc")
        remote.transport.delete(old)
    remote.catalogue.forget(pack_id)
    return pack_id, made, freed
