"""Workload 13 (issue 10): what the sync daemon, in its own process, costs
the agent's commits.

A store of ``daemon_checkpoints`` checkpoints in ``daemon_runs`` runs is
synced to moto by ``agentfs sync URL --watch`` (the CLI, a process of its
own, as docs/sync.md says to run it). The agent commits 10 KB states at 10/s
(default durability) into a run of that store, ``daemon_phase_commits`` per
phase, in two kinds of phase alternated ``daemon_rounds`` times: no daemon,
then the daemon started, caught up (``store.stats()`` shows no lag after a
marker commit) and left running during the phase, then stopped with SIGTERM
(it drains). The figure: the median commit with the daemon over the median
with none, paced alike. The daemon's CPU during its phases is read from
/proc (utime + stime) and noted.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from .. import data
from ..context import Context
from .common import agentfs_part, at_most, fig, median, p99, require_sync
from .history import build

W = "13 daemon load"
RUN = "bench/paced"
RATE = 10.0  # commits per second
GOAL = 1.3  # issue 10: commit at 10/s with the daemon syncing <= 1.3x with none
POLL_S = 0.5
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def agentfs_cli() -> str:
    """The ``agentfs`` command next to this interpreter (the venv's), else on PATH."""
    beside = Path(sys.executable).with_name("agentfs")
    found = str(beside) if beside.exists() else shutil.which("agentfs")
    if found is None:
        raise FileNotFoundError(f"no agentfs command beside {sys.executable} nor on PATH")
    return found


def cpu_seconds(pid: int) -> float:
    """utime + stime of process ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


class Daemon:
    """``agentfs --store PATH sync URL --watch`` in its own process."""

    def __init__(self, ctx: Context, store_dir: Path, url: str) -> None:
        options = json.dumps(ctx.moto().storage_options)
        cmd = [agentfs_cli(), "--store", str(store_dir), "sync", url, "--watch", "--storage-options", options]
        self.log = ctx.workdir / "w13-daemon.log"
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)

    def check_alive(self) -> None:
        if self.proc.poll() is not None:
            tail = self.log.read_text(errors="replace").strip()[-2000:]
            raise RuntimeError(f"agentfs sync --watch exited {self.proc.returncode}: {tail}")

    def stop(self, timeout: float) -> int:
        """SIGTERM (the daemon drains), then wait; its exit code."""
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            raise TimeoutError(f"agentfs sync --watch did not stop within {timeout:.0f} s of SIGTERM") from None


def wait_caught_up(store: Any, daemon: Daemon, timeout: float) -> float:
    """Commit a marker, then poll ``store.stats()`` until no remote lags; seconds it took."""
    store.run("bench/marker").commit({"t": time.time()})
    t = time.perf_counter()
    while time.perf_counter() - t < timeout:
        daemon.check_alive()
        remotes = store.stats().remotes
        if remotes and all(r.lag_checkpoints == 0 for r in remotes):
            return time.perf_counter() - t
        time.sleep(POLL_S)
    raise TimeoutError(f"the daemon did not catch up within {timeout:.0f} s")


def paced_commits(run: Any, states: list[dict[str, Any]]) -> list[float]:
    """Commit ``states`` at ``RATE`` per second; each commit's latency (ms)."""
    times = []
    nxt = time.perf_counter()
    for state in states:
        time.sleep(max(0.0, nxt - time.perf_counter()))
        t = time.perf_counter()
        run.commit(state)
        times.append((time.perf_counter() - t) * 1000)
        nxt += 1 / RATE
    return times


def agentfs_side(ctx: Context) -> dict[str, Any]:
    require_sync(ctx)
    af = ctx.agentfs
    assert af is not None
    s = ctx.sizes
    path = build(ctx, "w13-store", s.daemon_runs, s.daemon_checkpoints // s.daemon_runs)
    url = ctx.moto().bucket("bench-w13") + "/store"
    store = af.open(path)
    run = store.run(RUN)
    per_phase = s.daemon_phase_commits
    states = data.states(2 * s.daemon_rounds * per_phase + 1, 10_000, seed=13)
    run.commit(states.pop())  # warm-up, not timed
    times: dict[str, list[float]] = {"none": [], "daemon": []}
    catch_up: list[float] = []
    cpu = 0.0
    for r in range(s.daemon_rounds):
        batch = states[2 * r * per_phase : 2 * (r + 1) * per_phase]
        times["none"] += paced_commits(run, batch[:per_phase])
        daemon = Daemon(ctx, path, url)
        try:
            catch_up.append(wait_caught_up(store, daemon, s.resume_flush_timeout))
            before = cpu_seconds(daemon.proc.pid)
            times["daemon"] += paced_commits(run, batch[per_phase:])
            daemon.check_alive()
            cpu += cpu_seconds(daemon.proc.pid) - before
        finally:
            code = daemon.stop(s.flush_timeout)
        if code != 0:
            raise RuntimeError(f"agentfs sync --watch exited {code} on SIGTERM (see {daemon.log})")
    phase_s = s.daemon_rounds * per_phase / RATE
    return {"times": times, "catch_up": catch_up, "cpu_share": cpu / phase_s}


def run(ctx: Context) -> None:
    s = ctx.sizes
    res = agentfs_part(ctx, W, "paced commits with and without the daemon", lambda: agentfs_side(ctx))
    if res:
        ups = ", ".join(f"{t:.1f}" for t in res["catch_up"])
        ctx.report.note(
            f"{W}: the daemon caught up in {ups} s after each start (the first includes the initial push of "
            f"{s.daemon_checkpoints:,} checkpoints); it used {100 * res['cpu_share']:.0f}% of one core during its phases"
        )
    with_daemon = median(res["times"]["daemon"]) if res else None
    without = median(res["times"]["none"]) if res else None
    at_most(
        ctx,
        W,
        f"commit median at {RATE:.0f}/s, daemon syncing {s.daemon_checkpoints:,} checkpoints in {s.daemon_runs:,} runs (ms)",
        with_daemon,
        "same pace, no daemon",
        without,
        GOAL,
        f"{s.daemon_rounds} x {s.daemon_phase_commits} commits of 10 KB per kind, phases alternated; "
        "daemon: agentfs sync URL --watch, its own process",
    )
    fig(
        ctx,
        W,
        f"commit p99 at {RATE:.0f}/s, daemon syncing (ms)",
        p99(res["times"]["daemon"]) if res else None,
        "same pace, no daemon",
        p99(res["times"]["none"]) if res else None,
    )
