"""Reconciliation: the push index is a cache, the remote the truth.

List the remote, find what the index says it holds but it does not (a bucket emptied or recreated,
keys lost), forget those claims and push again. One listing of runs/ and one of objects/: on S3
about (keys / 1000) list requests, whatever the index holds.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ..format.keys import CONFIG, LOG_RECORDS
from .push import Pusher, PushStats


@dataclasses.dataclass
class Reconciliation:
    finished: float  # seconds since the epoch
    seconds: float
    lost_entries: int  # what the index claimed and the remote lacked
    lost_objects: int
    lost_records: int
    config_recreated: bool
    pushed: PushStats  # what went up again (and anything new)

    def summary(self) -> dict[str, Any]:
        """What `status` shows of it."""
        return {
            "finished": self.finished,
            "seconds": round(self.seconds, 3),
            "lost_entries": self.lost_entries,
            "lost_objects": self.lost_objects,
            "lost_records": self.lost_records,
            "config_recreated": self.config_recreated,
            "repushed_entries": self.pushed.entries,
            "repushed_objects": self.pushed.objects,
            "repushed_records": self.pushed.records,
        }


def recheck(pusher: Pusher, *, progress: bool = False, stop: threading.Event | None = None) -> Reconciliation:
    """List the remote, forget what it lost from the index, push again; the remote's config too.

    A remote whose config is gone is one this store pushed to (the index says so), not a typo: its
    config is written again, as by a first push. Entries a remote gc removed as retired, and those a
    local retirement record names, are not pushed back.
    """
    started = time.monotonic()
    remote, index, store = pusher.remote, pusher.index, pusher.store
    config_recreated = remote.transport.read(remote.transport.key(CONFIG), 1 << 20) is None
    held = remote.list_all_records()
    held_entries = {(run, record_id) for kind, run, record_id in held if kind == LOG_RECORDS}
    held_records = {record for record in held if record[0] != LOG_RECORDS}
    held_objects = set(remote.list_objects())
    lost_entries = {loc for loc in index.entries - held_entries - index.gone if loc[1] not in store.retired_ids(loc[0])}
    lost_objects = index.objects - held_objects
    lost_records = index.records - held_records
    index.forget(lost_objects, lost_entries, lost_records)
    if config_recreated:
        pusher.reconnect()
    stats = pusher.push(progress=progress, stop=stop)
    # objects of entries the remote still holds (the push above sent only those of entries it lacked)
    local = [oid for oid in lost_objects if oid not in index.objects and store.db.exists(oid)]
    with ThreadPoolExecutor(pusher.workers, thread_name_prefix="agentfs-recheck") as pool:
        for _ in pool.map(lambda oid: pusher.push_object(oid, stats, stop), local):
            pass
    report = Reconciliation(
        finished=time.time(),
        seconds=time.monotonic() - started,
        lost_entries=len(lost_entries),
        lost_objects=len(lost_objects),
        lost_records=len(lost_records),
        config_recreated=config_recreated,
        pushed=stats,
    )
    index.write_reconciliation(report.summary())
    return report
