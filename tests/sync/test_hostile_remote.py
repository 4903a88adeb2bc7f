"""A remote we do not control: what a party with write access to the bucket can do to a reader.

Real remotes (a file:// directory, s3 through s3fs against moto), written raw through tests/helpers/hostile.py;
pull, clone and lazy reads through the API and the `agentfs` CLI as a subprocess.
"""

from __future__ import annotations

import json
import logging
import posixpath
import time
from pathlib import Path

import pytest

import agentfs
from agentfs.errors import RemoteDataMissing
from agentfs.format import keys, kinds
from agentfs.format.pack import encode_head
from agentfs.format.retirement import Retirement, encode_retirement
from agentfs.ids import new_id
from agentfs.sync.pack_remote import PackRemote
from agentfs.sync.pull import PullStats, pull
from agentfs.sync.push import Pusher
from tests.cli.test_cli import cli
from tests.helpers.hostile import HostileRemote
from tests.servers import RemoteSpec, make_file_spec


def _remote(hostile: HostileRemote) -> PackRemote:
    return PackRemote(hostile.url, hostile.storage_options)


def _push(home: Path, hostile: HostileRemote) -> None:
    with agentfs.open(home) as store:
        Pusher(store.engine, _remote(hostile)).push()


def _pull(home: Path, hostile: HostileRemote) -> PullStats:
    with agentfs.open(home) as store:
        return pull(store.engine, _remote(hostile))


def _lazy(tmp_path: Path, hostile: HostileRemote) -> agentfs.Store:
    """A fresh store reading `hostile` lazily (a resuming agent on a new machine)."""
    return agentfs.open(tmp_path / "lazy", remote=hostile.url, storage_options=hostile.storage_options)


def _commits(home: Path, run: str, count: int) -> list[str]:
    with agentfs.open(home) as store:
        return [store.run(run).commit({"step": n}).id for n in range(count)]


def _ids(home: Path, run: str) -> list[str]:
    with agentfs.open(home) as store:
        return store.run(run).ids()


def _forge_retirement(hostile: HostileRemote, run: str, checkpoints: list[str]) -> str:
    """Write a well-formed retirement record of `run` naming `checkpoints`, as a pusher would (a pack and its own key)."""
    record_id = new_id()
    data = encode_retirement(Retirement(run, record_id, time.time_ns(), checkpoints, []), {"store": "forger"})
    hostile.put_record(kinds.RETIRED, kinds.pair_key(run, record_id), data)
    hostile.put(posixpath.join(*keys.retired_key(run, record_id)), data)
    return record_id


def test_the_fixture_writes_reads_lists_and_deletes_any_key(hostile_remote: HostileRemote, tmp_path: Path) -> None:
    _commits(tmp_path / "home", "r", 1)
    _push(tmp_path / "home", hostile_remote)
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


# a remote's authority: retirement records


def test_a_forged_retirement_of_unpushed_work_is_refused_whole(
    hostile_remote: HostileRemote, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    home = tmp_path / "home"
    pushed = _commits(home, "r", 3)
    _push(home, hostile_remote)
    unpushed = _commits(home, "r", 2)  # committed here after the push: the remote never held them
    record = _forge_retirement(hostile_remote, "r", [pushed[0], unpushed[0]])  # one it held, one it never held
    with caplog.at_level(logging.WARNING, logger="agentfs"):
        stats = _pull(home, hostile_remote)
    assert _ids(home, "r") == [*pushed, *unpushed]  # not even the one it held: refused whole
    assert stats.retired == []
    assert len(stats.refused) == 1 and record in stats.refused[0] and unpushed[0] in stats.refused[0]
    assert any(record in message and "refused" in message for message in caplog.messages)
    with agentfs.open(home) as store:
        store.gc(grace=0)
        assert store.verify().ok
        assert store.run("r").get(unpushed[0]).state == {"step": 0}
        assert any(record in reason for remote in store.stats().remotes for reason in remote.refused_retirements)


def test_a_forged_retirement_of_unpushed_journal_records_is_refused(hostile_remote: HostileRemote, tmp_path: Path) -> None:
    home = tmp_path / "home"
    ids = _commits(home, "r", 3)
    _push(home, hostile_remote)
    with agentfs.open(home) as store:
        assert store.run("r").once("send-mail", lambda: "sent") == "sent"  # a journal record the remote never held
        journal = store.engine.record_ids("r", "journal")
    record_id = new_id()
    data = encode_retirement(Retirement("r", record_id, time.time_ns(), ids[:1], journal), {"store": "forger"})
    hostile_remote.put(posixpath.join(*keys.retired_key("r", record_id)), data)
    hostile_remote.put_record(kinds.RETIRED, kinds.pair_key("r", record_id), data)
    stats = _pull(home, hostile_remote)
    assert len(stats.refused) == 1 and record_id in stats.refused[0]
    with agentfs.open(home) as store:
        assert store.engine.record_ids("r", "journal") == journal and store.run("r").ids() == ids
        assert store.run("r").once("send-mail", lambda: "sent twice") == "sent"


def test_a_forged_retirement_naming_a_checkpoint_pulled_from_another_remote_is_refused(
    hostile_remote: HostileRemote, tmp_path: Path
) -> None:
    elsewhere = HostileRemote.of(make_file_spec(tmp_path / "elsewhere"))
    source, home = tmp_path / "source", tmp_path / "home"
    ids = _commits(source, "r", 3)
    _push(source, elsewhere)
    _pull(home, elsewhere)  # home holds r's checkpoints from the other remote only
    _commits(home, "mine", 1)
    _push(home, hostile_remote)  # ... and pushed them here
    other = _commits(tmp_path / "third", "r2", 2)
    _push(tmp_path / "third", elsewhere)
    _pull(home, elsewhere)  # r2: never pushed to hostile_remote
    record = _forge_retirement(hostile_remote, "r2", other[:1])
    stats = _pull(home, hostile_remote)
    assert _ids(home, "r2") == other and _ids(home, "r") == ids
    assert len(stats.refused) == 1 and record in stats.refused[0]


def test_a_forged_retirement_naming_the_head_is_refused_here_and_on_a_fresh_clone(hostile_remote: HostileRemote, tmp_path: Path) -> None:
    home = tmp_path / "home"
    ids = _commits(home, "r", 3)
    _push(home, hostile_remote)
    record = _forge_retirement(hostile_remote, "r", ids[1:])  # the head and the one before it
    stats = _pull(home, hostile_remote)
    assert _ids(home, "r") == ids and stats.retired == [] and record in stats.refused[0] and "head" in stats.refused[0]
    fresh = tmp_path / "fresh"
    stats = _pull(fresh, hostile_remote)
    assert _ids(fresh, "r") == ids and record in stats.refused[0]
    with _lazy(tmp_path, hostile_remote) as lazy:
        checkpoint = lazy.run("r").latest()
        assert checkpoint is not None and checkpoint.id == ids[-1]


def test_a_retirement_of_what_the_remote_held_applies_and_pull_says_on_whose_policy(hostile_remote: HostileRemote, tmp_path: Path) -> None:
    home = tmp_path / "home"
    ids = _commits(home, "r", 3)
    _push(home, hostile_remote)
    record = _forge_retirement(hostile_remote, "r", ids[:1])
    stats = _pull(home, hostile_remote)
    assert _ids(home, "r") == ids[1:]
    assert [(applied.run, applied.record_id, applied.removed, applied.remote) for applied in stats.retired] == [
        ("r", record, ids[:1], _remote(hostile_remote).url)
    ]
    assert stats.refused == []


def test_pull_on_the_command_line_reports_what_it_retired_and_refused(tmp_path: Path) -> None:
    url = (tmp_path / "remote").as_uri()
    home = tmp_path / "home"
    ids = _commits(home, "r", 3)
    assert cli("sync", url, store=home).returncode == 0
    hostile = HostileRemote.of(RemoteSpec("file", url, {"auto_mkdir": True}))
    unpushed = _commits(home, "r", 1)
    applied = _forge_retirement(hostile, "r", ids[:1])
    refused = _forge_retirement(hostile, "r", unpushed)
    result = cli("pull", url, store=home)
    assert result.returncode == 0, result.stderr
    assert "retired 1 checkpoint(s) of run 'r'" in result.stdout and applied in result.stdout and url in result.stdout
    assert refused in result.stderr and "refused" in result.stderr
    status = json.loads(cli("status", "--json", store=home).stdout)
    assert any(refused in reason for remote in status["remotes"] for reason in remote["refused_retirements"])
    assert _ids(home, "r") == [*ids[1:], *unpushed]


# missing is loud


def test_a_deleted_pack_under_its_head_key_is_an_error_naming_head_and_pack(hostile_remote: HostileRemote, tmp_path: Path) -> None:
    home = tmp_path / "home"
    ids = _commits(home, "r", 2)
    _push(home, hostile_remote)
    (pack,) = hostile_remote.pack_ids()
    hostile_remote.delete_pack_bytes(pack)  # its index and the head key stay
    with _lazy(tmp_path, hostile_remote) as lazy, pytest.raises(RemoteDataMissing) as raised:
        lazy.run("r").latest()
    assert pack in str(raised.value) and ids[-1] in str(raised.value)


def test_a_head_key_naming_a_missing_checkpoint_is_an_error_never_the_older_one(hostile_remote: HostileRemote, tmp_path: Path) -> None:
    home = tmp_path / "home"
    _commits(home, "r", 2)
    _push(home, hostile_remote)
    missing = new_id()
    head_key = posixpath.join(*keys.head_key("r", missing))
    hostile_remote.put(head_key, encode_head("r", missing, hostile_remote.pack_ids()))
    with _lazy(tmp_path, hostile_remote) as lazy, pytest.raises(RemoteDataMissing) as raised:
        lazy.run("r").latest()
    assert missing in str(raised.value) and keys.head_name(missing) in str(raised.value)


def _two_packs(home: Path, hostile: HostileRemote) -> tuple[str, str]:
    """Runs 'a' and 'b' pushed one after the other: (a's pack, b's pack)."""
    _commits(home, "a", 2)
    _push(home, hostile)
    (first,) = hostile.pack_ids()
    _commits(home, "b", 2)
    _push(home, hostile)
    (second,) = set(hostile.pack_ids()) - {first}
    return first, second


@pytest.mark.parametrize("damage", ["truncated", "deleted"])
def test_a_truncated_or_deleted_pack_is_named_and_the_rest_of_a_clone_proceeds(
    hostile_remote: HostileRemote, tmp_path: Path, damage: str
) -> None:
    _first, second = _two_packs(tmp_path / "home", hostile_remote)
    if damage == "truncated":
        hostile_remote.truncate(hostile_remote.pack_key(second), 40)
    else:
        hostile_remote.delete_pack_bytes(second)  # its index stays
    stats = _pull(tmp_path / "clone", hostile_remote)
    assert len(_ids(tmp_path / "clone", "a")) == 2 and _ids(tmp_path / "clone", "b") == []
    assert stats.skipped and all(second in reason for reason in stats.skipped)
    target = tmp_path / "by-cli"
    result = cli("clone", hostile_remote.url, str(target), "--storage-options", json.dumps(hostile_remote.storage_options))
    assert result.returncode == 4 and second in result.stderr, result
    assert len(_ids(target, "a")) == 2


def test_a_traversal_run_name_inside_a_pack_is_skipped_naming_pack_and_key(hostile_remote: HostileRemote, tmp_path: Path) -> None:
    home = tmp_path / "home"
    _commits(home, "a", 2)
    _push(home, hostile_remote)
    hostile_remote.put_record(kinds.ENTRY, kinds.pair_key("../../x", new_id()), b"anything")
    forged = hostile_remote.pack_of(kinds.ENTRY, next(key for kind, key in hostile_remote.frames() if key.startswith(b"../../x")))
    target = tmp_path / "clone"
    result = cli("clone", hostile_remote.url, str(target), "--storage-options", json.dumps(hostile_remote.storage_options))
    assert result.returncode == 4, result
    assert forged in result.stderr and "../../x" in result.stderr and hostile_remote.url.split("://")[1].split("/")[0] in result.stderr
    assert len(_ids(target, "a")) == 2
    assert not (tmp_path / "x").exists()
    with _lazy(tmp_path, hostile_remote) as lazy:  # a lazy reader lists no such run and does not fail
        assert lazy.runs() == ["a"]


def test_one_bad_record_in_a_pack_is_skipped_and_the_rest_proceeds(hostile_remote: HostileRemote, tmp_path: Path) -> None:
    home = tmp_path / "home"
    ids = _commits(home, "a", 3)
    _push(home, hostile_remote)
    hostile_remote.put_record(kinds.ENTRY, kinds.pair_key("a", ids[0]), b"not an entry")
    stats = _pull(tmp_path / "clone", hostile_remote)
    assert _ids(tmp_path / "clone", "a") == ids[1:]
    forged = hostile_remote.pack_of(kinds.ENTRY, kinds.pair_key("a", ids[0]))
    assert len(stats.skipped) == 1 and ids[0] in stats.skipped[0] and forged in stats.skipped[0]
