"""The tool-call journal: runs/<run>/journal/<id>, one durable record per start and end of a call.

The crash test SIGKILLs a worker (tests/helpers/journal_worker.py) at random moments while it calls
a counting side effect through run.once, restarts it, and checks that no side effect happened twice,
every recorded result comes back on retry, and the calls cut short are listed as in flight.
"""

from __future__ import annotations

import collections
import hashlib
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import fsspec
import msgpack
import pytest

import agentfs
from agentfs.core.calls import encode_args
from agentfs.format import kinds
from agentfs.format.config import encode_config, remote_config
from agentfs.format.journal import MAGIC, Record, decode_record
from agentfs.format.keys import JOURNAL_RECORDS
from agentfs.ids import new_id
from agentfs.names import ID
from agentfs.serialization import decode_value
from tests.helpers import raw, remote_raw

WORKER = Path(__file__).parents[1] / "helpers" / "journal_worker.py"
RUN = "agent/tools"
KEYS = 100


def files(store: agentfs.Store, run: str = RUN) -> list[str]:
    return raw.record_ids(store, run, JOURNAL_RECORDS)


def record_bytes(store: agentfs.Store, record_id: str, run: str = RUN) -> bytes:
    return raw.record_bytes(store, run, JOURNAL_RECORDS, record_id)


def body_of(data: bytes) -> dict[str, Any]:
    assert data[:4] == MAGIC + b"\x01"
    assert hashlib.sha256(data[36:]).digest() == data[4:36]
    fields: dict[str, Any] = msgpack.unpackb(data[36:], raw=False)
    return fields


def fresh(store: agentfs.Store) -> agentfs.Run:
    """The run as another process sees it: a new Store, so nothing is cached."""
    return agentfs.open(store.root).run(RUN)


def must_not_run(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("the recorded result should have been returned instead")


# the crash test: real processes, SIGKILL


def _expected(i: int) -> dict[str, int]:
    return {"i": i, "sq": i * i}


def _worker(root: Path, side: Path, *extra: str) -> subprocess.Popen[str]:
    cmd = [sys.executable, str(WORKER), str(root), RUN, str(side), "--count", str(KEYS), *extra]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stdin=subprocess.PIPE, text=True)


def _reported(output: str) -> list[list[str]]:
    """The worker's complete lines (a line cut short by the kill was never reported), split once or twice."""
    return [line.split(" ", 2) for line in output.splitlines(keepends=True) if line.endswith("\n")]


def _in_flight_keys(root: Path) -> set[str]:
    with agentfs.open(root) as store:
        return {call.key for call in store.run(RUN).journal.in_flight()}


def test_once_survives_sigkill_at_random_moments(tmp_path: Path) -> None:
    root, side = tmp_path / "store", tmp_path / "side"
    rng = random.Random(20261123)
    returned: dict[str, Any] = {}  # key -> the result once() returned to some worker
    for kills in range(20):  # at least 6, then until one kill has landed between a start and its end
        if kills >= 6 and _in_flight_keys(root):
            break
        proc = _worker(root, side, "--sleep-ms", "10")
        assert proc.stdout is not None and proc.stdin is not None
        assert proc.stdout.readline() == "ready\n"
        time.sleep(rng.uniform(0.01, 0.08))  # the kill lands wherever the worker is by then
        os.kill(proc.pid, signal.SIGKILL)
        output, _ = proc.communicate(timeout=30)
        returned.update({words[1]: json.loads(words[2]) for words in _reported(output) if words[0] == "ok"})
        if proc.returncode == 0:  # it finished all its calls before the kill
            break
        assert proc.returncode == -signal.SIGKILL, output
    final = subprocess.run(
        [sys.executable, str(WORKER), str(root), RUN, str(side), "--count", str(KEYS)], capture_output=True, text=True, timeout=120
    )
    assert final.returncode == 0, final.stderr
    lines = _reported(final.stdout)
    assert lines[0] == ["ready\n"] and lines[-1] == ["done\n"]
    reported_in_flight = {words[1].strip() for words in lines if words[0] == "inflight"}
    returned.update({words[1]: json.loads(words[2]) for words in lines if words[0] == "ok"})

    counts = collections.Counter(side.read_text().splitlines())
    with agentfs.open(root) as store:
        run = store.run(RUN)
        journal = run.journal
        calls = {call.key: call for call in journal.calls()}
        assert journal.damaged == []
        assert all(ID.fullmatch(name) for name in files(store)), "a torn or temporary file in journal/"
        assert sorted(calls) == sorted(f"k{i}" for i in range(KEYS))
        in_flight = {call.key for call in journal.in_flight()}
        assert in_flight == reported_in_flight
        assert in_flight, "no kill landed between a call's start and its end in 20 tries"
        for i in range(KEYS):
            key, call = f"k{i}", calls[f"k{i}"]
            assert counts[key] <= 1, f"{key}'s side effect happened {counts[key]} times"
            assert call.attempts == 1 and call.args == {"args": [i], "kwargs": {}}
            if call.status == "ok":
                assert counts[key] == 1
                assert call.result == _expected(i)
                assert run.once(key, must_not_run) == _expected(i)
            else:
                assert call.status == "in_flight" and key in in_flight
                with pytest.raises(agentfs.InFlight, match=key):
                    run.once(key, must_not_run)
        for key, result in returned.items():  # durable before once() returned, and the same value
            assert calls[key].status == "ok" and calls[key].result == result


def test_two_processes_racing_once_run_each_side_effect_once(tmp_path: Path) -> None:
    root, side = tmp_path / "store", tmp_path / "side"
    agentfs.open(root).close()
    workers = [_worker(root, side, "--sleep-ms", "2", "--go") for _ in range(2)]
    for proc in workers:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    outputs = [proc.communicate(timeout=120)[0] for proc in workers]
    assert [proc.returncode for proc in workers] == [0, 0]
    counts = collections.Counter(side.read_text().splitlines())
    assert counts == collections.Counter(f"k{i}" for i in range(KEYS)), "a side effect ran twice or never"
    for output in outputs:
        for words in _reported(output):
            if words[0] == "ok":
                assert json.loads(words[2]) == _expected(int(words[1][1:]))
    with agentfs.open(root) as store:
        calls = store.run(RUN).journal.calls()
        assert len(calls) == KEYS and all(call.status == "ok" and call.attempts == 1 for call in calls)
        assert {call.writer["pid"] for call in calls} == {proc.pid for proc in workers}


# records on disk


def test_once_writes_a_durable_start_and_end_record(store: agentfs.Store) -> None:
    run = store.run(RUN)
    seen = []

    def search(query: str, *, limit: int) -> list[str]:
        seen.append(query)
        return [query] * limit

    assert run.once("search:1", search, "cats", limit=2) == ["cats", "cats"]
    start_id, end_id = files(store)
    start, end = body_of(record_bytes(store, start_id)), body_of(record_bytes(store, end_id))
    writer = {"store": store.id, "host": socket.gethostname(), "pid": os.getpid()}
    assert start.keys() == {"format", "run", "id", "kind", "key", "call", "name", "created", "writer", "args"}
    assert (start["format"], start["run"], start["id"], start["kind"], start["call"]) == (1, RUN, start_id, "start", start_id)
    assert (start["key"], start["writer"]) == ("search:1", writer)
    assert start["name"].endswith("search")
    assert decode_value(start["args"], "args") == {"args": ["cats"], "kwargs": {"limit": 2}}
    assert end.keys() == {"format", "run", "id", "kind", "key", "call", "name", "created", "writer", "result"}
    assert (end["kind"], end["call"], end["key"], end["name"]) == ("ok", start_id, "search:1", start["name"])
    assert decode_value(end["result"], "result") == ["cats", "cats"]
    assert start["created"] <= end["created"]
    assert decode_record(record_bytes(store, end_id), RUN, end_id, "test") == Record(
        RUN, end_id, "ok", "search:1", start_id, start["name"], end["created"], writer, result=end["result"]
    )

    assert run.once("search:1", search, "dogs", limit=1) == ["cats", "cats"]  # recorded: not called, nothing written
    assert seen == ["cats"] and files(store) == [start_id, end_id]
    call = fresh(store).journal.get("search:1")
    assert call is not None and (call.status, call.start_id, call.end_id, call.attempts) == ("ok", start_id, end_id, 1)
    assert call.finished is not None and call.started <= call.finished
    assert list(store.engine.local_records(JOURNAL_RECORDS)) == [(RUN, start_id), (RUN, end_id)]


def test_damaged_records_are_skipped_reported_and_never_misread(store: agentfs.Store) -> None:
    run = store.run(RUN)
    run.once("sent", lambda: "first")
    run.once("paid", lambda: 42)
    sent_start, sent_end, paid_start, paid_end = files(store)
    data = record_bytes(store, sent_end)
    raw.set_record_bytes(store, RUN, JOURNAL_RECORDS, sent_end, data[: len(data) // 2])  # the ok end of "sent", torn
    flipped = bytearray(record_bytes(store, paid_start))
    flipped[-3] ^= 0x10
    raw.set_record_bytes(store, RUN, JOURNAL_RECORDS, paid_start, bytes(flipped))  # the start of "paid", one bit off
    impostor = new_id()
    raw.set_record_bytes(store, RUN, JOURNAL_RECORDS, impostor, record_bytes(store, paid_end))  # intact, but not the record its name says

    journal = fresh(store).journal
    assert [r.id for r in journal.records()] == [sent_start, paid_end]
    damaged = dict(journal.damaged)
    assert sorted(damaged) == sorted([sent_end, paid_start, impostor])
    assert "checksum" in damaged[sent_end] and "checksum" in damaged[paid_start] and "holds record" in damaged[impostor]
    sent, paid = journal.get("sent"), journal.get("paid")
    assert sent is not None and sent.status == "in_flight"  # its end is unreadable: it may have happened, never "not done"
    with pytest.raises(agentfs.InFlight):
        journal.once("sent", must_not_run)
    assert paid is not None and paid.status == "ok" and paid.start is None  # known from its end record alone
    assert journal.once("paid", must_not_run) == 42
    with pytest.raises(agentfs.FormatError, match="damaged"):
        _ = paid.args


def test_decode_record_refuses_every_malformed_record(store: agentfs.Store) -> None:
    store.run(RUN).once("k", lambda: 1)
    start_id = files(store)[0]
    good = record_bytes(store, start_id)

    def sealed(fields: dict[str, Any]) -> bytes:
        body = msgpack.packb(fields, use_bin_type=True)
        return MAGIC + b"\x01" + hashlib.sha256(body).digest() + body

    fields = body_of(good)
    assert decode_record(sealed(fields), RUN, start_id, "x").key == "k"
    with pytest.raises(agentfs.IntegrityError):
        decode_record(good[:20], RUN, start_id, "x")
    with pytest.raises(agentfs.FormatError, match="version"):
        decode_record(good[:3] + b"\x02" + good[4:], RUN, start_id, "x")
    with pytest.raises(agentfs.FormatError, match="holds record"):
        decode_record(good, "other/run", start_id, "x")
    bad_fields: list[dict[str, Any]] = [
        {**fields, "format": 2},
        {**fields, "kind": "maybe"},
        {**fields, "key": ""},
        {**fields, "created": True},
        {**fields, "call": "01ARZ3NDEKTSV4RRFFQ69G5FAV"},  # a start names itself
        {**fields, "writer": {"host": "h"}},
        {**fields, "run": "../escape"},
        {key: value for key, value in fields.items() if key != "args"},
        {**fields, "kind": "ok", "call": "01ARZ3NDEKTSV4RRFFQ69G5FAV"},  # ok without result or unrecorded
        {**fields, "kind": "error", "call": "01ARZ3NDEKTSV4RRFFQ69G5FAV", "error": {"type": 1}},
    ]
    for bad in bad_fields:
        with pytest.raises(agentfs.FormatError):
            decode_record(sealed(bad), RUN, start_id, "x")
    with pytest.raises(agentfs.FormatError, match="not a map"):
        decode_record(sealed([1, 2]), RUN, start_id, "x")  # type: ignore[arg-type]


def test_records_of_nested_runs_and_runs_named_journal_stay_apart(store: agentfs.Store) -> None:
    for name in ("x", "x/journal", "journal", "x/journal/01ARZ3NDEKTSV4RRFFQ69G5FAV"):
        store.run(name).once("k", lambda name=name: name)
    found = collections.Counter(run for run, _id in store.engine.local_records(JOURNAL_RECORDS))
    assert found == {"x": 2, "x/journal": 2, "journal": 2, "x/journal/01ARZ3NDEKTSV4RRFFQ69G5FAV": 2}
    for name in found:
        journal = agentfs.open(store.root).run(name).journal
        assert journal.once("k", must_not_run) == name and journal.damaged == []


# outcomes


def test_errors_are_recorded_and_the_next_once_retries(store: agentfs.Store) -> None:
    run = store.run(RUN)
    failure = ValueError("boom " + "x" * 5000)

    def flaky() -> str:
        raise failure

    with pytest.raises(ValueError) as raised:
        run.once("flaky", flaky)
    assert raised.value is failure
    end = body_of(record_bytes(store, files(store)[1]))
    assert end["kind"] == "error" and "result" not in end
    assert end["error"]["type"] == "builtins.ValueError" and end["error"]["message"] == str(failure)[:4096]
    call = fresh(store).journal.get("flaky")
    assert call is not None and call.status == "error" and call.error == end["error"]
    with pytest.raises(agentfs.NotFound, match="ended with an error"):
        _ = call.result

    assert run.once("flaky", lambda: "fine") == "fine"
    call = fresh(store).journal.get("flaky")
    assert call is not None and (call.status, call.attempts, call.result) == ("ok", 2, "fine")
    assert len(files(store)) == 4


def test_an_interrupted_call_stays_in_flight_until_abandoned(store: agentfs.Store) -> None:
    run = store.run(RUN)

    def interrupted() -> None:
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run.once("charge", interrupted)
    assert len(files(store)) == 1  # the start only: nobody knows whether the charge went through
    journal = fresh(store).journal
    (call,) = journal.in_flight()
    assert call.key == "charge" and call.status == "in_flight" and call.end is None and call.finished is None
    with pytest.raises(agentfs.InFlight) as raised:
        run.once("charge", must_not_run)
    message = str(raised.value)
    for text in ("'charge'", RUN, socket.gethostname(), str(os.getpid()), "abandon", "side effect"):
        assert text in message
    assert isinstance(raised.value, agentfs.Conflict)

    with pytest.raises(agentfs.NotFound):
        journal.abandon("never-called", "typo")
    abandoned = journal.abandon("charge", "checked the bank: not charged")
    assert abandoned.status == "error" and abandoned.error == {"type": "agentfs.Abandoned", "message": "checked the bank: not charged"}
    assert run.once("charge", lambda: "charged") == "charged"
    call = fresh(store).journal.get("charge")
    assert call is not None and (call.status, call.attempts) == ("ok", 2)
    with pytest.raises(agentfs.Conflict, match="not in flight"):
        journal.abandon("charge", "again")


def test_unstorable_results_count_as_done_but_cannot_be_returned(store: agentfs.Store) -> None:
    run = store.run(RUN)
    marker = object()
    assert run.once("obj", lambda: marker) is marker  # the caller still gets its own value
    big = b"x" * ((16 << 20) + 1)
    assert run.once("big", lambda: big) is big
    ends = [body_of(record_bytes(store, name)) for name in files(store)[1::2]]
    assert [("result" in end, "unrecorded" in end) for end in ends] == [(False, True), (False, True)]
    assert "artifact" in ends[1]["unrecorded"]
    for key in ("obj", "big"):
        with pytest.raises(agentfs.SerializationError, match="not recorded"):
            run.once(key, must_not_run)
        call = run.journal.get(key)
        assert call is not None and call.status == "ok" and call.unrecorded


def test_unstorable_args_and_bad_keys_fail_before_anything_is_written(store: agentfs.Store) -> None:
    run = store.run(RUN)
    with pytest.raises(agentfs.SerializationError, match=r'args\[1\]\["client"\]'):
        run.once("k", must_not_run, 1, {"client": object()})
    with pytest.raises(agentfs.SerializationError, match=r'kwargs\["client"\]'):
        run.once("k", must_not_run, client=object())
    with pytest.raises(agentfs.SerializationError, match=r'args\["x"\]'):
        run.tool_call("t", {"x": object()})
    for key in ("", "k" * 1025, 7, "\udc80"):
        with pytest.raises(agentfs.InvalidName):
            run.once(key, must_not_run)  # type: ignore[arg-type]
    assert files(store) == []
    assert run.once("k" * 1024, lambda: "longest key") == "longest key"


# the context manager and the decorator


def test_tool_call_records_the_body_and_skips_a_key_that_succeeded(store: agentfs.Store) -> None:
    run = store.run(RUN)
    with run.tool_call("search", {"q": "cats"}, key="s1") as call:
        assert not call.done
        call.result = ["a cat"]
    assert len(files(store)) == 2
    with run.tool_call("search", {"q": "cats"}, key="s1") as again:
        assert again.done and again.result == ["a cat"]
    assert len(files(store)) == 2

    with pytest.raises(RuntimeError), run.tool_call("search", {"q": "dogs"}, key="s2"):
        raise RuntimeError("rate limited")
    failed = run.journal.get("s2")
    assert failed is not None and failed.error == {"type": "builtins.RuntimeError", "message": "rate limited"}

    with run.tool_call("log") as first, run.tool_call("log") as second:  # no key: each call is its own record
        pass
    assert first.key != second.key and first.key.startswith("call-")
    journal = fresh(store).journal
    s1, audit = journal.get("s1"), journal.get(first.key)
    assert s1 is not None and (s1.name, s1.args, s1.result) == ("search", {"q": "cats"}, ["a cat"])
    assert audit is not None and audit.status == "ok" and audit.result is None


def test_tool_decorator_keys_calls_by_their_arguments(store: agentfs.Store) -> None:
    run = store.run(RUN)
    calls = []

    @run.tool()
    def add(a: int, b: int = 0) -> int:
        calls.append((a, b))
        return a + b

    assert add(1, b=2) == 3 and add(1, b=2) == 3 and add(2, b=1) == 3
    assert add(a=5, b=6) == add(b=6, a=5) == 11
    assert calls == [(1, 2), (2, 1), (5, 6)]
    recorded = run.journal.calls()
    assert len(recorded) == 3 and all(call.name.endswith("add") for call in recorded)
    digest = hashlib.sha256(encode_args((1,), {"b": 2})).hexdigest()[:32]
    assert recorded[0].key == f"{recorded[0].name}:{digest}"

    @run.tool("fetch", key=lambda url: f"fetch:{url}")
    def fetch(url: str) -> str:
        calls.append(url)
        return url.upper()

    assert fetch("a") == fetch("a") == "A" and calls[-1] == "a" and calls.count("a") == 1
    call = run.journal.get("fetch:a")
    assert call is not None and call.name == "fetch" and fetch.__name__ == "fetch"


# another machine


def test_records_are_fetched_from_a_remote_and_verified(tmp_path: Path) -> None:
    with agentfs.open(tmp_path / "a") as machine_a:
        machine_a.run(RUN).once("report", lambda: {"sent": True})
        remote = tmp_path / "remote"
        remote.mkdir()
        fs = fsspec.filesystem("file")
        held_ids = raw.record_ids(machine_a, RUN, JOURNAL_RECORDS)
        held = {record_id: raw.record_bytes(machine_a, RUN, JOURNAL_RECORDS, record_id) for record_id in held_ids}
        for record_id, data in held.items():  # the remote's layout: records in packs
            remote_raw.put_record(fs, str(remote), kinds.JOURNAL, kinds.pair_key(RUN, record_id), data)
        (remote / "config").write_bytes(encode_config(remote_config(machine_a.engine.config)))  # a remote is known by its config
    bogus = new_id()
    remote_raw.put_record(fs, str(remote), kinds.JOURNAL, kinds.pair_key(RUN, bogus), b"AFJ\x01" + bytes(40))
    with agentfs.open(tmp_path / "b", remote=str(remote)) as machine_b:
        journal = machine_b.run(RUN).journal
        assert journal.once("report", must_not_run) == {"sent": True}
        assert sorted(files(machine_b)) == sorted(held)
        assert [record_id for record_id, _why in journal.damaged] == [bogus]
    installed = files(machine_b)
    assert all(record_bytes(machine_b, name) == held[name] for name in installed)  # byte for byte
    assert machine_b.engine.append_record(RUN, JOURNAL_RECORDS, installed[0], b"anything") is False  # never replaced
