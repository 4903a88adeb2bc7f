"""store.watch() and `agentfs sync URL --watch --on-commit CMD` against commits from other processes.

Promised: watch sees commits from another process within a second; --on-commit runs once per
checkpoint, with the run and id passed to it. Commit times are taken in the committing process
(time.time_ns() when commit returned) and compared with when this process saw the checkpoint.
"""

from __future__ import annotations

import gc
import json
import shlex
import signal
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ulid import ULID

import agentfs
from agentfs.engine import notify as watch_module
from tests.cli.test_cli import cli
from tests.helpers import raw
from tests.sync.test_sync_daemon import AGENTFS_COMMAND, HELPERS, Proc, processes, spawn, wait_until

__all__ = ["processes"]  # a fixture, used by name

Seen = tuple[str, str, int]  # run, id, time_ns
WITHIN = 1.0  # the promised bound, seconds from commit to watch


# helpers


def committer(processes: list[Proc], root: Path, runs: str, count: int, *extra: str) -> Proc:
    """A committing process, ready and waiting for go()."""
    proc = spawn([sys.executable, str(HELPERS / "committer.py"), str(root), runs, str(count), *extra], stdin=True)
    processes.append(proc)
    assert proc.out.next(timeout=30) == "ready"
    return proc


def go(proc: Proc) -> None:
    assert proc.popen.stdin is not None
    proc.popen.stdin.write("go\n")
    proc.popen.stdin.flush()


def committed(proc: Proc, count: int) -> list[Seen]:
    """What the committer reports: (run, id, time_ns when commit returned), in commit order."""
    lines = [proc.out.next(timeout=120).split() for _ in range(count)]
    assert proc.out.next(timeout=60) == "done"
    assert proc.popen.wait(timeout=30) == 0
    return [(run, checkpoint_id, int(ns)) for run, checkpoint_id, ns in lines]


class Collector:
    """Iterates a watch in a thread, noting when each checkpoint arrived."""

    def __init__(self, watch: Iterator[agentfs.Checkpoint]) -> None:
        self.seen: list[Seen] = []
        self._thread = threading.Thread(target=self._run, args=(watch,), daemon=True)
        self._thread.start()

    def _run(self, watch: Iterator[agentfs.Checkpoint]) -> None:
        for checkpoint in watch:
            self.seen.append((checkpoint.run, checkpoint.id, time.time_ns()))

    def join(self, timeout: float) -> list[Seen]:
        """Everything it saw, once the watch ended (by its own timeout)."""
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "the watch did not end after its timeout"
        return self.seen


def locations(seen: list[Seen]) -> list[tuple[str, str]]:
    return [(run, checkpoint_id) for run, checkpoint_id, _ns in seen]


def assert_prompt(commits: list[Seen], seen: list[Seen], label: str) -> None:
    """Every commit seen, within WITHIN seconds of its commit returning."""
    arrival = {(run, checkpoint_id): ns for run, checkpoint_id, ns in seen}
    delays = [(arrival[(run, checkpoint_id)] - ns) / 1e9 for run, checkpoint_id, ns in commits]
    print(f"\n{label}: commit -> watch {', '.join(f'{d * 1e3:.0f}' for d in delays)} ms")
    assert max(delays) < WITHIN, f"{label}: a commit was seen {max(delays):.2f}s after it returned"


# watch


def test_watch_sees_another_process_commits_within_a_second_once_each_in_order(tmp_path: Path, processes: list[Proc]) -> None:
    root = tmp_path / "store"
    with agentfs.open(root) as store:
        before = {(name, store.run(name).commit({"old": i}).id) for i, name in enumerate(["r", "r", "other"])}
        proc = committer(processes, root, "r", 8, "--interval", "0.25")
        with store.watch(timeout=4) as watch:  # 4 s of quiet at the end: longer than a full rescan
            go(proc)
            seen = []
            for checkpoint in watch:
                seen.append((checkpoint.run, checkpoint.id, time.time_ns()))
                assert checkpoint.state["run"] == "r" and checkpoint.state["i"] == len(seen) - 1
                if len(seen) == 8:
                    break
            commits = committed(proc, 8)
            assert locations(seen) == locations(commits), "not every commit, once, in commit order"
            assert_prompt(commits, seen, "one run, another process")
            assert list(watch) == [], "a checkpoint was yielded twice (or one appeared from nowhere)"
        assert not before & set(locations(seen))


def test_watch_filters_by_run_and_ends_after_its_timeout(tmp_path: Path, processes: list[Proc]) -> None:
    root = tmp_path / "store"
    with agentfs.open(root) as store:
        for name in ("a", "b/c"):
            store.run(name).commit({"old": name})
        with pytest.raises(agentfs.InvalidName):
            store.watch("../escape")
        started = time.monotonic()
        assert list(store.watch(timeout=0.5)) == []
        assert 0.5 <= time.monotonic() - started < 3.0

        proc = committer(processes, root, "a,b/c", 10, "--interval", "0.1")
        only_a, every = Collector(store.watch("a", timeout=2)), Collector(store.watch(timeout=2))
        go(proc)
        commits = committed(proc, 10)
        ended = time.monotonic()
        seen_a, seen_all = only_a.join(30), every.join(30)
        assert time.monotonic() - ended >= 1.0  # ran on until 2 s without a commit
    assert locations(seen_a) == [loc for loc in locations(commits) if loc[0] == "a"]
    assert sorted(locations(seen_all)) == sorted(locations(commits)) and len(seen_all) == 10
    for name in ("a", "b/c"):
        assert [loc for loc in locations(seen_all) if loc[0] == name] == [loc for loc in locations(commits) if loc[0] == name]
    assert_prompt(commits, seen_all, "two runs, another process")


def test_watch_sees_commits_in_runs_whose_directories_did_not_exist(tmp_path: Path, processes: list[Proc]) -> None:
    """inotify can miss files in a directory made a moment earlier: the first commit of a run."""
    root = tmp_path / "store"
    runs = ["new/deep/run", "fresh/one", "fresh/two/x"]
    with agentfs.open(root) as store:
        assert not any(raw.record_ids(store, run) for run in runs)  # each run's first commit is also its first record
        proc = committer(processes, root, ",".join(runs), 9, "--interval", "0.3")
        one, every = Collector(store.watch("new/deep/run", timeout=3)), Collector(store.watch(timeout=3))
        go(proc)
        commits = committed(proc, 9)
        seen_one, seen_all = one.join(30), every.join(30)
    assert locations(seen_one) == [loc for loc in locations(commits) if loc[0] == "new/deep/run"]
    assert sorted(locations(seen_all)) == sorted(locations(commits)) and len(seen_all) == 9
    assert_prompt(commits, seen_all, "new runs, every run watched")
    assert_prompt([c for c in commits if c[0] == "new/deep/run"], seen_one, "new run, watched by name")


def test_watch_yields_every_one_of_many_quick_commits_exactly_once(tmp_path: Path, processes: list[Proc]) -> None:
    """2,000 commits as fast as another process can make them: events may be dropped, rescans catch up."""
    root = tmp_path / "store"
    count = 2000
    with agentfs.open(root) as store:
        proc = committer(processes, root, "bulk/a,bulk/b", count, "--durability", "process")
        one, every = Collector(store.watch("bulk/a", timeout=5)), Collector(store.watch(timeout=5))
        go(proc)
        commits = committed(proc, count)
        seen_one, seen_all = one.join(120), every.join(120)
    assert len(seen_all) == count and set(locations(seen_all)) == set(locations(commits))
    assert len(seen_one) == count // 2 and set(locations(seen_one)) == {loc for loc in locations(commits) if loc[0] == "bulk/a"}


def test_rescans_alone_find_commits_when_events_are_lost(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every event dropped (as when inotify's queue overflows): the index is refreshed and listed every
    RESCAN seconds, for one run or for all."""
    monkeypatch.setattr(watch_module._Hints, "on_any_event", lambda self, event: None)
    with agentfs.open(tmp_path / "store") as store:
        store.run("old").commit({})
        one, every = Collector(store.watch("old", timeout=watch_module.RESCAN + 2)), Collector(store.watch(timeout=4))
        commits = []
        for name in ("old", "brand/new", "old"):
            commits.append((name, store.run(name).commit({}).id, time.time_ns()))
            time.sleep(0.3)
        seen_one, seen_all = one.join(30), every.join(30)
    assert locations(seen_all) == locations(commits)
    assert locations(seen_one) == [loc for loc in locations(commits) if loc[0] == "old"]
    by_id = {checkpoint_id: ns for _run, checkpoint_id, ns in commits}
    assert max((ns - by_id[cid]) / 1e9 for _run, cid, ns in seen_one) < watch_module.RESCAN + 1.0
    assert max((ns - by_id[cid]) / 1e9 for _run, cid, ns in seen_all) < watch_module.RESCAN + 1.0


def test_a_check_reads_what_the_index_added_not_the_whole_history(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A hint costs what is new: listing every entry again would make each commit cost a watcher (and a
    daemon's on-commit hooks) time in proportion to the history (engine/entry_log.py). New segments
    sealed before the watcher looked are read from their footers; a compaction makes it list once."""
    root = tmp_path / "store"
    with agentfs.open(root) as store, agentfs.open(root) as other:
        history = other.run("r")
        for step in range(50):
            history.commit({"step": step})
        changes = store.watch(timeout=5)
        listed = []
        real_all_ids = store.engine.index.all_ids
        monkeypatch.setattr(store.engine.index, "all_ids", lambda kind: listed.append(kind) or real_all_ids(kind))
        commits = [history.commit({"step": 50}).id]
        assert next(changes).id == commits[0]
        other.engine.seal_for_compaction()  # the rest lands in a new segment, sealed before the watcher reads it
        commits += [history.commit({"step": step}).id for step in (51, 52)]
        other.engine.seal_for_compaction()
        assert [next(changes).id for _ in range(2)] == commits[1:]
        assert listed == [] and store.engine.index.footers  # the new segment was read from its footer
        history.prune(keep_last=5)
        other.gc(grace=0)  # compaction: every watcher's index is rebuilt
        commits.append(history.commit({"step": 53}).id)
        assert next(changes).id == commits[-1]  # once: what the relisting finds again is not repeated
        assert listed  # the rebuild made it list everything once
        changes.close()
        assert store.engine.index.entry_log._marks == {}  # nothing kept for a closed watch


def test_closing_or_dropping_a_watch_stops_its_observer(tmp_path: Path) -> None:
    """The threads a watch starts are named by difference and must end: a count of all threads would also move with
    any other test's thread that ends meanwhile (seen under pytest-xdist)."""

    def started_since(before: set[threading.Thread]) -> set[threading.Thread]:
        return set(threading.enumerate()) - before

    with agentfs.open(tmp_path / "store") as store:
        before = set(threading.enumerate())
        watch = store.watch()
        observers = started_since(before)
        assert observers  # watching starts at once, not at the first next()
        store.run("r").commit({"before": "first next()"})
        assert next(watch).state == {"before": "first next()"}
        watch.close()
        assert wait_until(lambda: not any(thread.is_alive() for thread in observers), 5)
        with pytest.raises(StopIteration):
            next(watch)

        before = set(threading.enumerate())
        dropped = store.watch()
        observers = started_since(before)
        assert observers
        del dropped
        gc.collect()
        assert wait_until(lambda: not any(thread.is_alive() for thread in observers), 5)


# --on-commit


def hook_command(log: Path, *args: str) -> str:
    words = [sys.executable, str(HELPERS / "record_hook.py"), str(log)]
    return " ".join(shlex.quote(word) for word in words) + " {run} {id} " + " ".join(args)


def start_daemon(processes: list[Proc], root: Path, url: str, command: str, *extra: str) -> Proc:
    daemon = spawn([*AGENTFS_COMMAND, "--store", str(root), "sync", url, "--watch", "--on-commit", command, *extra])
    processes.append(daemon)
    while not daemon.err.next(timeout=30).startswith("agentfs: syncing"):
        pass  # a down remote's first warning may come before the banner
    return daemon


def stop_daemon(daemon: Proc) -> tuple[int, str]:
    daemon.popen.send_signal(signal.SIGTERM)
    code = daemon.popen.wait(timeout=60)
    return code, "".join(daemon.err.seen) + "\n".join(daemon.err.rest())


def hook_calls(log: Path) -> list[dict[str, Any]]:
    if not log.exists():
        return []
    return [record for record in map(json.loads, log.read_text().splitlines()) if "argv" in record]


def state_file(root: Path) -> list[str]:
    (path,) = (root / "remotes").glob("*/on-commit")
    return path.read_text().splitlines()


def commit_and_wait(processes: list[Proc], root: Path, log: Path, runs: str, count: int, total: int) -> list[Seen]:
    """Commit from another process; wait until the hook has been called `total` times in all."""
    proc = committer(processes, root, runs, count, "--interval", "0.1")
    go(proc)
    commits = committed(proc, count)
    assert wait_until(lambda: len(hook_calls(log)) >= total, 20), f"{len(hook_calls(log))} hook calls, expected {total}"
    return commits


def test_on_commit_runs_once_per_checkpoint_with_its_run_and_id_across_restarts(tmp_path: Path, processes: list[Proc]) -> None:
    root, log = tmp_path / "store", tmp_path / "hook.log"
    with agentfs.open(root) as store:
        older = [store.run("r1").commit({"before": i}).id for i in range(2)]  # before the hook existed: never fired
    url = (tmp_path / "remote").as_uri()
    command = hook_command(log, "'a literal arg'")

    daemon = start_daemon(processes, root, url, command)
    first = commit_and_wait(processes, root, log, "r1,team/r2", 6, 6)
    code, errors = stop_daemon(daemon)
    assert code == 0, errors
    calls = hook_calls(log)
    assert [(c["run"], c["checkpoint"]) for c in calls] == locations(first)  # one at a time, in commit order
    for call in calls:
        assert call["argv"] == [call["run"], call["checkpoint"], "a literal arg"]
        assert call["store"] == str(root)
    delays = [(call["time_ns"] - ns) / 1e9 for call, (_r, _c, ns) in zip(calls, first, strict=True)]
    print(f"\ncommit -> hook done: {', '.join(f'{d * 1e3:.0f}' for d in delays)} ms")

    committed_while_down = commit_and_wait(processes, root, log, "team/r2", 3, 6)
    assert len(hook_calls(log)) == 6  # no daemon, no hook
    daemon = start_daemon(processes, root, url, command)
    assert wait_until(lambda: len(hook_calls(log)) >= 9, 20), "commits made while the daemon was down did not fire"
    # one command at a time, the backlog first: once a later commit has fired, no duplicate can still come
    last = commit_and_wait(processes, root, log, "r1", 1, 10)
    code, errors = stop_daemon(daemon)
    assert code == 0, errors

    fired = [(c["run"], c["checkpoint"]) for c in hook_calls(log)]
    assert fired == locations(first + committed_while_down + last)
    assert len(set(fired)) == len(fired) == 10
    assert not {("r1", cid) for cid in older} & set(fired)

    lines = state_file(root)
    since = int(lines[0].removeprefix("since "))
    assert all(ULID.from_str(cid).milliseconds < since for cid in older)
    assert lines[1:] == [f"{run} {cid}" for run, cid in fired]


def test_on_commit_failures_are_logged_and_a_down_remote_does_not_hold_hooks_back(tmp_path: Path, processes: list[Proc]) -> None:
    root, log = tmp_path / "store", tmp_path / "hook.log"
    agentfs.open(root).close()
    (tmp_path / "blocker").write_text("a file: nothing can be created below it")
    url = (tmp_path / "blocker" / "remote").as_uri()

    daemon = start_daemon(processes, root, url, hook_command(log), "--drain-timeout", "1")
    commits = commit_and_wait(processes, root, log, "ok/one,will-fail,ok/two", 3, 3)
    code, errors = stop_daemon(daemon)

    calls = hook_calls(log)
    assert [(c["run"], c["checkpoint"]) for c in calls] == locations(commits)
    delays = [(call["time_ns"] - ns) / 1e9 for call, (_r, _c, ns) in zip(calls, commits, strict=True)]
    assert max(delays) < 5.0, f"hooks waited on the remote: {delays}"
    failed_id = commits[1][1]
    assert f"will-fail@{failed_id}" in errors and "exited with code 3" in errors, errors
    assert "agentfs sync to" in errors and "failed" in errors, "the remote was expected to be down"
    assert code == 4, errors  # nothing could be drained
    assert not (tmp_path / "blocker").is_dir()
    assert state_file(root)[1:] == [f"{run} {cid}" for run, cid, _ns in commits]  # the failure is not retried


def test_stopping_lets_a_running_command_finish_and_one_cut_short_runs_again(
    tmp_path: Path, processes: list[Proc], monkeypatch: pytest.MonkeyPatch
) -> None:
    root, log = tmp_path / "store", tmp_path / "hook.log"
    agentfs.open(root).close()
    url = (tmp_path / "remote").as_uri()
    command = hook_command(log)

    monkeypatch.setenv("HOOK_SLEEP", "1.5")  # the daemons' environment, so their commands'
    daemon = start_daemon(processes, root, url, command)
    proc = committer(processes, root, "slow/finishes", 1)
    go(proc)
    ((_run, finishing, _ns),) = committed(proc, 1)
    assert wait_until(lambda: log.exists() and "started" in log.read_text(), 20)
    code, errors = stop_daemon(daemon)  # the command sleeps 1.5 s: stop waits for it
    assert code == 0, errors
    assert [c["checkpoint"] for c in hook_calls(log)] == [finishing]
    assert state_file(root)[1:] == [f"slow/finishes {finishing}"]

    log.unlink()
    monkeypatch.setenv("HOOK_SLEEP", "60")
    daemon = start_daemon(processes, root, url, command, "--drain-timeout", "0.5")
    proc = committer(processes, root, "slow/cut", 1)
    go(proc)
    ((_run, cut, _ns),) = committed(proc, 1)
    assert wait_until(lambda: log.exists() and "started" in log.read_text(), 20)
    stopped = time.monotonic()
    _code, errors = stop_daemon(daemon)
    assert time.monotonic() - stopped < 10, "stop did not bound its wait for the command"
    assert hook_calls(log) == [] and "terminated" in errors, errors
    assert state_file(root)[1:] == [f"slow/finishes {finishing}"]  # not recorded: it runs again

    monkeypatch.setenv("HOOK_SLEEP", "0")
    start_daemon(processes, root, url, command)
    assert wait_until(lambda: [c["checkpoint"] for c in hook_calls(log)] == [cut], 20)


def test_on_commit_needs_watch_and_a_command_that_splits(tmp_path: Path) -> None:
    root = tmp_path / "store"
    agentfs.open(root).close()
    url = (tmp_path / "remote").as_uri()
    without_watch = cli("sync", url, "--on-commit", "echo {id}", store=root)
    assert without_watch.returncode == 2 and "--on-commit needs --watch" in without_watch.stderr
    unbalanced = cli("sync", url, "--watch", "--on-commit", "echo 'unclosed", store=root)
    assert unbalanced.returncode == 2 and "no closing quotation" in unbalanced.stderr.lower()
    assert not (tmp_path / "remote").exists()
