"""The journal travels with the run: pushed to S3, pulled elsewhere, the same `once` answers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import fsspec
import pytest

import agentfs
from agentfs.format import kinds
from agentfs.format.keys import JOURNAL_RECORDS
from agentfs.sync.pack_remote import PackRemote
from agentfs.sync.pull import pull
from agentfs.sync.push import Pusher
from tests.helpers import raw, remote_raw
from tests.servers import RemoteSpec, make_s3_spec

RUN = "agent/tools"


def must_not_run(*_args: Any) -> Any:
    raise AssertionError("a call that succeeded was run again")


def _journal_on_machine_a(store: agentfs.Store) -> dict[str, str]:
    """20 calls: 17 succeed, 2 fail, 1 is cut short (still in flight). Returns key -> status."""
    run = store.run(RUN)
    status = {}
    for i in range(17):
        run.once(f"ok{i}", lambda i=i: {"i": i, "square": i * i})
        status[f"ok{i}"] = "ok"
    for i in range(2):
        with pytest.raises(ValueError):
            run.once(f"err{i}", _fail, i)
        status[f"err{i}"] = "error"
    with pytest.raises(KeyboardInterrupt):
        run.once("cut", _interrupt)
    status["cut"] = "in_flight"
    run.commit({"step": 1})
    return status


def _fail(i: int) -> None:
    raise ValueError(f"tool {i} failed")


def _interrupt() -> None:
    raise KeyboardInterrupt


def _same_answers(store: agentfs.Store, status: dict[str, str]) -> None:
    run = store.run(RUN)
    assert {call.key: call.status for call in run.journal.calls()} == status
    for i in range(17):
        assert run.once(f"ok{i}", must_not_run) == {"i": i, "square": i * i}
    with pytest.raises(agentfs.InFlight, match="cut"):
        run.once("cut", must_not_run)
    assert run.once("err0", lambda: "retried") == "retried"  # a failed call may run again


def _journal(store: agentfs.Store | Path) -> dict[str, bytes]:
    ids = raw.record_ids(store, RUN, JOURNAL_RECORDS)
    return {record_id: raw.record_bytes(store, RUN, JOURNAL_RECORDS, record_id) for record_id in ids}


def test_a_pulled_journal_gives_the_same_once_answers(tmp_path: Path, moto_server: object) -> None:
    spec = make_s3_spec(moto_server)  # type: ignore[arg-type]
    with agentfs.open(tmp_path / "a") as machine_a:
        status = _journal_on_machine_a(machine_a)
        stats = Pusher(machine_a.engine, PackRemote(spec.url, spec.storage_options), workers=4).push()
        assert stats.records == len(raw.record_ids(machine_a, RUN, JOURNAL_RECORDS)) > 20
        again = Pusher(machine_a.engine, PackRemote(spec.url, spec.storage_options), workers=4).push()
        assert again.records == 0, "records the remote holds were sent again"

    with agentfs.open(tmp_path / "b") as machine_b:
        result = pull(machine_b.engine, PackRemote(spec.url, spec.storage_options))
        assert result.records == stats.records
        assert _journal(machine_b) == _journal(tmp_path / "a")
        _same_answers(machine_b, status)
        assert machine_b.verify().ok


def test_a_store_opened_on_the_remote_sees_the_journal_lazily(tmp_path: Path, remote: RemoteSpec) -> None:
    with agentfs.open(tmp_path / "a") as machine_a:
        status = _journal_on_machine_a(machine_a)
        Pusher(machine_a.engine, PackRemote(remote.url, remote.storage_options), workers=4).push()
    with agentfs.open(tmp_path / "b", remote=remote.url, storage_options=remote.storage_options) as machine_b:
        _same_answers(machine_b, status)
        # and machine B's own calls go back up without resending A's
        stats = Pusher(machine_b.engine, PackRemote(remote.url, remote.storage_options), workers=4).push()
        assert stats.records == 2  # the retry of err0: its start and its end


def test_delete_removes_the_journal_here_and_on_the_remote_after_its_gc(tmp_path: Path) -> None:
    from agentfs.sync.remote_gc import remote_gc

    url = (tmp_path / "remote").as_uri()
    with agentfs.open(tmp_path / "a") as store:
        _journal_on_machine_a(store)
        pusher = Pusher(store.engine, PackRemote(url, {"auto_mkdir": True}), workers=4)
        pusher.push()
        report = store.run(RUN).delete()
        assert report.journal_removed > 20 and raw.record_ids(store, RUN, JOURNAL_RECORDS) == []
        assert store.run(RUN).journal.calls() == []
        pusher.push()
        gc = remote_gc(PackRemote(url, {}), store.engine, grace=0, settle=3)
        assert gc.journal_deleted == report.journal_removed and gc.entries_deleted == 1
    with agentfs.open(tmp_path / "b", remote=url) as other:
        assert other.run(RUN).journal.calls() == [] and other.run(RUN).latest() is None


def test_the_daemon_pushes_journal_records_and_flush_waits_for_them(tmp_path: Path) -> None:
    url = (tmp_path / "remote").as_uri()
    with agentfs.open(tmp_path / "a") as store, store.sync(url, {"auto_mkdir": True}) as daemon:
        assert daemon.flush(timeout=10)
        store.run(RUN).once("only-a-journal", lambda: "done")  # no checkpoint at all: flush must still wait
        assert daemon.flush(timeout=10)
        names = sorted(remote_raw.record_ids(fsspec.filesystem("file"), str(tmp_path / "remote"), kinds.JOURNAL, RUN))
        assert names == raw.record_ids(store, RUN, JOURNAL_RECORDS) and len(names) == 2
