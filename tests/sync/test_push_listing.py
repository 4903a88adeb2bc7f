"""When a pusher lists packs/: at its first batch, and at a batch that relies on what the remote was said to hold.

A daemon pushes once per commit and the remote holds a pack per push, so a listing of packs/ at every
batch cost more with every commit (35 ms a push at 150 packs on moto, the commit beside it 1.8x slower).
A batch of new records relies on no claim and lists nothing; one that would skip an object or a borrowed
entry lists first, so what the remote lost is still uploaded again before its head key.
"""

from __future__ import annotations

import os
from pathlib import Path

import agentfs
from agentfs.sync.pack_remote import PackRemote
from agentfs.sync.push import Pusher
from tests.helpers import raw, remote_raw
from tests.servers import make_file_spec


class CountingRemote(PackRemote):
    """A PackRemote that counts the listings of packs/ its catalogue makes."""

    def __init__(self, url: str, storage_options: dict[str, object]) -> None:
        super().__init__(url, storage_options)
        self.listings = 0
        listed = self.catalogue.pack_ids

        def pack_ids() -> list[str]:
            self.listings += 1
            return listed()

        self.catalogue.pack_ids = pack_ids  # type: ignore[method-assign]


def test_batches_of_new_records_list_packs_once_per_pusher(tmp_path: Path) -> None:
    spec = make_file_spec(tmp_path)
    with agentfs.open(tmp_path / "a") as store:
        remote = CountingRemote(spec.url, spec.storage_options)
        pusher = Pusher(store.engine, remote)
        run = store.run("main")
        for step in range(4):
            run.commit({"step": step, "notes": os.urandom(2_000).hex()})
            assert pusher.push().entries == 1
        assert remote.listings == 1  # the first batch's: it adopts what a push cut short left
        with agentfs.open(tmp_path / "fresh", remote=spec.url, storage_options=spec.storage_options) as fresh:
            assert fresh.run("main").latest().state["step"] == 3


def test_a_later_batch_relying_on_the_remote_lists_and_uploads_again_what_it_lost(tmp_path: Path) -> None:
    """The same pusher, so its catalogue still names the lost packs: only a listing made for the batch finds them gone."""
    spec = make_file_spec(tmp_path)
    source = tmp_path / "a"
    with agentfs.open(source) as store:
        remote = CountingRemote(spec.url, spec.storage_options)
        pusher = Pusher(store.engine, remote)
        run = store.run("main")
        first = run.commit({"step": 1}, artifacts={"data.bin": os.urandom(300_000)})
        pusher.push()
        assert remote_raw.delete_packs_holding(*spec.connect(), raw.object_ids(source)) >= 1
        last = run.commit({"step": 2}, parent=first.id, keep_artifacts=True)  # needs the artifact's objects again
        stats = pusher.push()
    with agentfs.open(tmp_path / "fresh", remote=spec.url, storage_options=spec.storage_options) as fresh:
        head = fresh.run("main").latest()
        assert head.id == last.id and len(head.artifacts["data.bin"].read_bytes()) == 300_000
    assert stats.lost_objects >= 1 and remote.listings == 2
