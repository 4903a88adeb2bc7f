"""A pack of objects is indexed while the next pack goes up, and every index is up before the push's heads."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import agentfs
from agentfs.sync.pack_remote import PackRemote
from agentfs.sync.push import Pusher
from tests.servers import make_file_spec

WAIT = 20.0  # seconds the first index waits for the next pack's bytes: reached only if they never come meanwhile


class SlowFirstIndex(PackRemote):
    """The first pack index put waits until the next pack's bytes start going up (or WAIT passes)."""

    def __init__(self, url: str, storage_options: dict[str, object]) -> None:
        super().__init__(url, storage_options)
        self.packs = 0
        self.next_pack = threading.Event()
        self.overlapped: bool | None = None
        self.calls: list[str] = []

    def put_pack(self, pack_id: str, data: bytes) -> None:
        self.packs += 1
        self.calls.append(f"pack {pack_id}")
        if self.packs == 2:
            self.next_pack.set()
        super().put_pack(pack_id, data)

    def put_pack_index(self, pack_id: str, footer: bytes) -> None:
        if self.overlapped is None:
            self.overlapped = self.next_pack.wait(WAIT)
        self.calls.append(f"index {pack_id}")
        super().put_pack_index(pack_id, footer)

    def put_head(self, stored: str, checkpoint_id: str, data: bytes) -> bytes | None:
        self.calls.append("head")
        return super().put_head(stored, checkpoint_id, data)


def test_a_pack_of_objects_is_indexed_while_the_next_goes_up(tmp_path: Path) -> None:
    spec = make_file_spec(tmp_path)
    with agentfs.open(tmp_path / "a") as store:
        store.run("main").commit({"step": 1}, artifacts={"data.bin": os.urandom(1_000_000)})
        remote = SlowFirstIndex(spec.url, spec.storage_options)
        Pusher(store.engine, remote, pack_target=200_000).push()
    assert remote.overlapped is True and remote.packs >= 3
    packs = [call.split()[1] for call in remote.calls if call.startswith("pack ")]
    indexes = [call.split()[1] for call in remote.calls if call.startswith("index ")]
    assert sorted(packs) == sorted(indexes) and remote.calls[-1] == "head"  # each pack indexed, all before the head
    for pack_id in packs:
        assert remote.calls.index(f"pack {pack_id}") < remote.calls.index(f"index {pack_id}")  # whole before indexed
    with agentfs.open(tmp_path / "fresh", remote=spec.url, storage_options=spec.storage_options) as fresh:
        assert len(fresh.run("main").latest().artifacts["data.bin"].read_bytes()) == 1_000_000
