"""--on-commit: run a command once per checkpoint committed locally, the local equivalent of a webhook.

The command fires from its own thread, one at a time, whatever the remote is doing. What has fired
is kept in the remote's sync directory, in the file `on-commit`: a first line `since <ms>` (when the
hook was first set up there; checkpoints older than that never fire) and then one `<run> <id>` line
per checkpoint whose command has exited, whatever its exit code. A restarted daemon fires for the
checkpoints committed while it was down, and never twice for one that has a line. The line is
written after the command exits, so a command interrupted by a crash (or cut short by stop()) runs
again on restart: at least once, exactly once unless interrupted. Lines are not fsynced: a power
cut may lose the last ones, with the same effect.
"""

from __future__ import annotations

import logging
import os
import shlex
import subprocess
import threading
import time
from pathlib import Path

from ..engine.notify import Watcher
from ..engine.repository import Repository
from ..errors import FormatError
from ..format.refs import EntryAddress
from ..fsutil import make_dirs, write_atomic
from ..ids import id_time_ns

log = logging.getLogger("agentfs.sync")
STATE_FILE = "on-commit"
KILL_WAIT = 5.0


class CommitHook:
    """Runs `command` (split like a shell would, no shell) for each new checkpoint of `store`.

    `{run}` and `{id}` in any argument become the checkpoint's run and id; the environment also
    holds AGENTFS_RUN, AGENTFS_CHECKPOINT and AGENTFS_STORE.
    """

    def __init__(self, store: Repository, command: str, state_dir: Path) -> None:
        try:
            argv = shlex.split(command)
        except ValueError as exc:
            raise ValueError(f"on-commit command {command!r}: {exc}") from None
        if not argv:
            raise ValueError("on-commit command is empty")
        self.store = store
        self.argv = argv
        self.path = state_dir / STATE_FILE
        self._since = 0
        self._done: set[EntryAddress] = set()
        self._halt = threading.Event()
        self._lock = threading.Lock()  # between starting a command and stop() cutting it short
        self._process: subprocess.Popen[bytes] | None = None
        self._cut_short = False
        self._watcher: Watcher | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> CommitHook:
        # _load writes the state file through tmp/ beside it, which a fresh remote state dir lacks (test_watch's on-commit tests)
        make_dirs(self.path.parent / "tmp", sync=False)
        self._load()
        self._watcher = Watcher(self.store)  # from here on it reports every new checkpoint
        backlog = sorted(self._watcher.seen, key=lambda location: (location[1], location[0]))  # committed while down
        self._thread = threading.Thread(target=self._loop, args=(backlog,), name="agentfs-on-commit", daemon=True)
        self._thread.start()
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Let the running command finish (at most `timeout` seconds, then terminate it), start no other."""
        self._halt.set()
        if self._watcher is not None:
            self._watcher.close()
        if self._thread is None:
            return
        self._thread.join(timeout)
        if self._thread.is_alive():
            with self._lock:
                self._cut_short = True
                process = self._process
            if process is not None:
                log.warning("agentfs on-commit: %s still running after %.0fs, terminated (runs again on restart)", self.argv[0], timeout)
                process.terminate()
                self._thread.join(KILL_WAIT)
                if self._thread.is_alive():
                    process.kill()
                    self._thread.join(KILL_WAIT)

    def _load(self) -> None:
        try:
            text = self.path.read_text()
        except FileNotFoundError:
            since = time.time_ns() // 1_000_000  # in ms, as ids hold their time
            write_atomic(self.path.parent / "tmp", self.path, f"since {since}\n".encode(), sync=False)
            text = self.path.read_text()  # another daemon may have set it up a moment earlier
        lines = text.split("\n")
        header, records, torn = lines[0], lines[1:-1], lines[-1]  # after the last newline: a torn record
        if not header.startswith("since ") or not header[6:].isdigit():
            raise FormatError(f"{self.path}: not an on-commit state file (first line {header[:40]!r})")
        self._since = int(header[6:])
        self._done = {(run, checkpoint_id) for run, _, checkpoint_id in (line.rpartition(" ") for line in records)}
        if torn:
            with open(self.path, "a") as handle:
                handle.write("\n")  # end it, so that the next record starts a line of its own

    def _due(self, location: EntryAddress) -> bool:
        return location not in self._done and id_time_ns(location[1]) // 1_000_000 >= self._since

    def _loop(self, backlog: list[EntryAddress]) -> None:
        assert self._watcher is not None
        batch: list[EntryAddress] | None = backlog
        while batch is not None:
            for location in batch:
                if self._halt.is_set():
                    return
                if self._due(location):
                    self._fire(*location)
            batch = self._watcher.new()

    def _fire(self, run: str, checkpoint_id: str) -> None:
        argv = [arg.replace("{run}", run).replace("{id}", checkpoint_id) for arg in self.argv]
        env = {**os.environ, "AGENTFS_RUN": run, "AGENTFS_CHECKPOINT": checkpoint_id, "AGENTFS_STORE": str(self.store.root)}
        error = self._run(argv, env)
        if error is None:
            return  # cut short by stop(): not recorded, so it runs again on restart
        if error:
            log.warning("agentfs on-commit for %s@%s: %s (not retried)", run, checkpoint_id, error)
        self._record(run, checkpoint_id)

    def _run(self, argv: list[str], env: dict[str, str]) -> str | None:
        """An empty string if the command succeeded, else what went wrong; None when stop() cut it short."""
        with self._lock:
            if self._cut_short:
                return None
            try:
                process = self._process = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL)  # output: the daemon's
            except OSError as exc:
                return f"cannot run {argv[0]!r}: {exc}"
        code = process.wait()
        with self._lock:
            self._process = None
            if self._cut_short:
                return None
        return f"exited with code {code}" if code else ""

    def _record(self, run: str, checkpoint_id: str) -> None:
        self._done.add((run, checkpoint_id))
        try:
            with open(self.path, "a") as handle:
                handle.write(f"{run} {checkpoint_id}\n")
        except OSError as exc:
            log.warning("agentfs on-commit: cannot record %s@%s in %s: %s", run, checkpoint_id, self.path, exc)
