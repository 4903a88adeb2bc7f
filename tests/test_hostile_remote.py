"""A remote we do not control: what a party with write access to the bucket can do to a reader.

Real remotes (a file:// directory, s3 through s3fs against moto), written raw through tests/helpers/hostile.py.
"""

from __future__ import annotations

import agentfs
from tests.helpers.hostile import HostileRemote

pytest_plugins = ["tests.servers", "tests.helpers.hostile"]


def test_the_fixture_writes_reads_lists_and_deletes_any_key_beside_what_agentfs_pushed(hostile_remote: HostileRemote, tmp_path) -> None:
    with agentfs.open(tmp_path / "home") as store:
        store.run("r").commit({"step": 1})
        with store.sync(hostile_remote.url, hostile_remote.storage_options) as daemon:
            daemon.flush()
    pushed = hostile_remote.list_keys()
    assert "config" in pushed and hostile_remote.pack_ids()
    hostile_remote.put("stray/any key", b"\x00\xffbytes")
    assert hostile_remote.get("stray/any key") == b"\x00\xffbytes"
    assert "stray/any key" in hostile_remote.list_keys()
    hostile_remote.truncate("stray/any key", 2)
    assert hostile_remote.get("stray/any key") == b"\x00\xff"
    hostile_remote.delete("stray/any key")
    assert not hostile_remote.exists("stray/any key")
    assert hostile_remote.list_keys() == pushed
