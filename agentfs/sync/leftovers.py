"""What pushes cut short leave on a remote: packs without an index and (file-like remotes) temporary keys.

A pusher, and a remote gc before it lists leftovers, adopts a young whole pack of objects (puts its index, read
back from the pack's last bytes); `verify --remote` reports the rest and a remote gc deletes them once older than
its grace period (docs/FORMAT.md, "Remote gc"). A PackRemote's listing of packs/ notes them (`unindexed`).
"""

from __future__ import annotations

import time

from ..errors import FormatError
from ..format import keys, kinds
from ..format.pack import decode_pack_index
from ..format.segment import TRAILER, decode_trailer
from .pack_catalogue import MAX_INDEX, Leftover
from .pack_remote import PackRemote
from .remote import modified

ADOPT_AGE = 600.0  # a pack without an index younger than this is indexed by the next push (or by a remote gc)


def list_leftovers(remote: PackRemote) -> list[Leftover]:
    """Packs without an index and (file-like remotes) temporary keys: what pushes cut short left; a pusher
    still writing one puts its index (or links it) within seconds of finishing it. Lists packs/ (and tmp/)."""
    remote.catalogue.pack_ids()
    found = list(remote.catalogue.unindexed.values())
    transport = remote.transport
    if transport.file_like:
        infos = transport.list_infos(transport.key(keys.TMP)) or []
        found += [Leftover(str(info["name"]), modified(info), int(info.get("size") or 0)) for info in infos]
    return sorted(found)


def adopt(remote: PackRemote, pack_id: str, leftover: Leftover) -> bool:
    """Put the index of a whole pack of objects that a push cut short left without one (a pack's index is its
    last bytes: read back, checked), so a resumed push does not send its objects again. False, changing
    nothing, for a pack that is not whole or holds anything but objects (its entries would wait on others)."""
    where = f"remote {remote.url} pack {pack_id}"
    transport = remote.transport
    if leftover.size <= TRAILER.size:
        return False
    try:
        with transport.failing(f"read {leftover.key}", FileNotFoundError):
            trailer = bytes(transport.fs.cat_file(leftover.key, start=leftover.size - TRAILER.size, end=leftover.size))
            sealed = decode_trailer(trailer, leftover.size)
            if sealed is None or leftover.size - sealed[0] > MAX_INDEX:
                return False
            data = bytes(transport.fs.cat_file(leftover.key, start=sealed[0], end=leftover.size))
        _size, entries = decode_pack_index(data, pack_id, where)
    except (FileNotFoundError, FormatError):
        return False
    if any(entry.kind != kinds.OBJECT for entry in entries):
        return False
    transport.create(transport.key(*keys.pack_index_key(pack_id)), data)
    remote.catalogue.keep_index(pack_id, data)
    remote.catalogue.learn(pack_id, entries)
    remote.catalogue.unindexed.pop(pack_id, None)
    return True


def adopt_young(remote: PackRemote) -> list[str]:
    """Index each whole pack of objects that a push cut short left without an index less than ADOPT_AGE ago (as
    of the remote's last listing of packs/); the packs adopted. A pusher does it so as not to send them again,
    and a remote gc before it lists leftovers (remote_gc.py), so that it never deletes a pack a pusher may be
    adopting that moment, whatever its grace period."""
    now = time.time()
    return [
        pack_id
        for pack_id, leftover in list(remote.catalogue.unindexed.items())
        if now - leftover.modified < ADOPT_AGE and adopt(remote, pack_id, leftover)
    ]
