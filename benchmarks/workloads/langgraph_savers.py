"""Workload 9: LangGraph's savers on the growing conversation (issue 4).

The conversation of workload 2, fed to each saver the way LangGraph's loop
does (``peers_langgraph``: ``create_checkpoint``, the whole state in
``channel_values``, ``new_versions`` only for the channels that changed, from
the saver's own ``get_next_version``), and after each ``put`` one
``put_writes`` on the new checkpoint (the task's write of the next message).
Savers: AgentFSSaver on ``agentfs.open(dir)`` (default durability, fsync) and
on ``agentfs.open(dir, durability="process")``; InMemorySaver, SqliteSaver on
a file, ObjectStorageSaver on a local directory.

Every saver runs in lockstep with the others (``drive``): step i, and each
sampling round, goes to every saver in turn, starting one saver later each
time, so that all see the same machine load at the same point of the thread; run one after another, their
ratios swung with the load between runs. Goals (issue 12) compare AgentFSSaver
at its default durability with SqliteSaver, which fsyncs each put and put_writes.

Per saver: ``put`` median and p99 and ``put_writes`` median over every step;
``get_tuple`` (latest, thread config) and ``list(limit=10)`` medians, sampled
about 100 times over the run, right after that step's writes (of every saver); on-disk size at
the end divided by the msgpack size of the final state; the files on disk at the end, before the
saver is closed (every file under the saver's directory: for agentfs its config, fixed lock files and
segments; for SQLite the database, its WAL and shared-memory file), next to those that keep one.
"""

from __future__ import annotations

import contextlib
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgpack

from .. import data
from ..context import Context
from ..peers import tree_files, tree_size
from ..peers_langgraph import InMemoryPeer, LangGraphPeer, ObjectStoragePeer, SqlitePeer
from .common import at_most, fig, in_turn, median, p99

W = "9 langgraph savers"
THREAD = "bench-lg"
CONFIG = {"configurable": {"thread_id": THREAD, "checkpoint_ns": ""}}
LIST_LIMIT = 10
SAMPLES = 100  # get_tuple / list samples per saver
GOALS = {"put": 1.3, "put_writes": 2.0, "get_tuple": 1.5, "list": 1.2}  # issue 12: AgentFSSaver (fsync) <= x SqliteSaver
FSYNCS = {
    InMemoryPeer.name: "none (memory only)",
    SqlitePeer.name: "yes (WAL, synchronous=FULL: every put and put_writes)",
    ObjectStoragePeer.name: "no (fsspec pipe_file in place)",
}


class _Clock:
    """Stands in for a saver inside a peer: times ``put`` alone (not the
    building of the checkpoint around it) and keeps the config it returns."""

    def __init__(self, saver: Any) -> None:
        self.saver = saver
        self.put_ms: list[float] = []
        self.config: Any = None

    def __getattr__(self, name: str) -> Any:
        return getattr(self.saver, name)

    def put(self, *args: Any) -> Any:
        t = time.perf_counter()
        self.config = self.saver.put(*args)
        self.put_ms.append((time.perf_counter() - t) * 1000)
        return self.config


class AgentFSPeer(LangGraphPeer):
    name = "AgentFSSaver"

    def __init__(self, ctx: Context, root: Path, durability: str) -> None:
        from agentfs.integrations.langgraph import AgentFSSaver

        af = ctx.agentfs
        assert af is not None
        self.root = root
        self.durability = durability
        self.store = af.open(root) if durability == "power" else af.open(root, durability=durability)
        super().__init__(AgentFSSaver(self.store))

    def size_on_disk(self) -> int:
        return tree_size(self.root)

    def close(self) -> None:
        self.store.close()


class Driven:
    """One saver under the workload: its peer, and its latencies (ms) so far."""

    def __init__(self, peer: Any) -> None:
        self.peer = peer
        self.clock = _Clock(peer.saver)
        peer.saver = self.clock
        self.saver = self.clock.saver
        self.ms: dict[str, list[float]] = {"put_writes": [], "get_tuple": [], "list": []}
        self.seconds = 0.0

    def step(self, i: int, state: dict[str, Any], write: dict[str, str]) -> None:
        """Step `i`: its put, then one put_writes on the new checkpoint."""
        t0 = time.perf_counter()
        self.peer.put(THREAD, state["step"], state)
        t = time.perf_counter()
        self.saver.put_writes(self.clock.config, [("messages", [write]), ("step", i + 1)], f"task-{i:06d}")
        self.ms["put_writes"].append((time.perf_counter() - t) * 1000)
        self.seconds += time.perf_counter() - t0

    def sample(self, i: int) -> None:
        """get_tuple (latest) and list(limit=LIST_LIMIT), checked against what step `i` wrote."""
        t = time.perf_counter()
        tup = self.saver.get_tuple(CONFIG)
        self.ms["get_tuple"].append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        listed = list(self.saver.list(CONFIG, limit=LIST_LIMIT))
        self.ms["list"].append((time.perf_counter() - t) * 1000)
        wanted = self.clock.config["configurable"]["checkpoint_id"]
        name = self.peer.name
        assert tup is not None and tup.config["configurable"]["checkpoint_id"] == wanted, f"{name}: get_tuple is not the latest"
        assert len(listed) == min(LIST_LIMIT, i + 1), f"{name}: list(limit={LIST_LIMIT}) gave {len(listed)}"

    def finish(self, final_state: dict[str, Any]) -> dict[str, Any]:
        """Check the latest checkpoint, count what the saver keeps on disk (files before close), close it."""
        last = self.saver.get_tuple(CONFIG)
        name = self.peer.name
        assert last is not None and last.checkpoint["channel_values"]["messages"] == final_state["messages"], f"{name}: bad latest"
        assert [w[1] for w in last.pending_writes] == ["messages", "step"], f"{name}: bad pending writes"
        root = getattr(self.peer, "root", None)  # InMemorySaver keeps no files
        files = None if root is None else tree_files(root)
        size = self.peer.size_on_disk()
        self.peer.close()
        print(f"  ({self.peer.name}, {self.peer.durability}: {self.seconds:.1f} s of puts and put_writes)", flush=True)
        return {"put": self.clock.put_ms, **self.ms, "size": size, "files": files}


def drive(savers: dict[str, Driven], states: list[dict[str, Any]], writes: list[dict[str, str]]) -> tuple[dict[str, Any], dict[str, str]]:
    """Run the workload through every saver in lockstep: step i goes to each saver in turn, the order rotated at every
    step, so that each sees the same machine load at the same point of the thread (ratios then hold from run to run).
    (results, failures) by the savers' keys; a saver that fails leaves the others running."""
    every = max(1, len(states) // SAMPLES)
    failed: dict[str, str] = {}

    def each(turn: int, call: Callable[..., Any], *args: Any) -> dict[str, Any]:
        """`call` on every saver, starting from a different one at each turn: what runs just before a saver's call
        (and leaves the machine warm or cold) varies alike for all."""
        done = {}
        for key in in_turn(turn, list(savers)):
            try:
                done[key] = call(savers[key], *args)
            except Exception as exc:  # one saver failing leaves the others' rows
                traceback.print_exc()
                failed[key] = f"{type(exc).__name__}: {exc}"
                with contextlib.suppress(Exception):
                    savers.pop(key).peer.close()
        return done

    for i, state in enumerate(states):
        each(i, Driven.step, i, state, writes[i])
        if i % every == every - 1:
            each(i // every, Driven.sample, i)  # not i: with 5 savers sampled every 10 steps, i % 5 would never change
    return each(0, Driven.finish, states[-1]), failed


def ours_key(durability: str) -> str:
    return f"AgentFSSaver ({durability})"


def run(ctx: Context) -> None:
    n = ctx.sizes.langgraph_steps
    states = list(data.conversation(n + 1))
    writes = [s["messages"][-1] for s in states[1:]]  # step i's task writes the message of step i + 1
    states = states[:n]
    final = len(msgpack.packb(states[-1]))
    savers: dict[str, Driven] = {}
    makers: list[tuple[str, Callable[[], LangGraphPeer]]] = [
        (make.name, lambda make=make, n_peer=n_peer: make(ctx.new_dir(f"w9-peer{n_peer}")))
        for n_peer, make in enumerate([InMemoryPeer, SqlitePeer, ObjectStoragePeer])
    ]
    if ctx.agentfs is not None:
        makers += [(ours_key(d), lambda d=d: AgentFSPeer(ctx, ctx.new_dir(f"w9-agentfs-{d}"), d)) for d in ("power", "process")]
    for key, make in makers:
        try:
            savers[key] = Driven(make())
        except Exception as exc:
            ctx.report.note(f"{W}: {key} cannot run here: {type(exc).__name__}: {exc}")
    got, failed = drive(savers, states, writes)
    for key, why in failed.items():
        ctx.report.note(f"{W}: {key} failed: {why}")
    ours = {d: got.get(ours_key(d)) for d in ("power", "process")}
    ctx.report.note(
        f"{W}: {n} steps, final state {final:,} bytes of msgpack; one put and one put_writes per step; "
        f"get_tuple (latest) and list(limit={LIST_LIMIT}) sampled every {max(1, n // SAMPLES)} steps; "
        "every saver in lockstep (each step, and each sampling round, to every saver in turn, starting one saver later "
        "each time: the same load for all); "
        "goals only next to SqliteSaver, the one peer that fsyncs like AgentFSSaver's default (fsync: "
        + "; ".join(f"{k}: {v}" for k, v in FSYNCS.items())
        + "; AgentFSSaver: default yes, durability=process no)"
    )
    if ours["process"] is not None:
        ctx.report.note(f"{W}: AgentFSSaver durability=process keeps {ours['process']['size'] / final:.2f}x the final state")
    for make in (InMemoryPeer, SqlitePeer, ObjectStoragePeer):
        if make.name in got:
            compare(ctx, savers[make.name].peer, got[make.name], ours, final, GOALS if make is SqlitePeer else {})


def compare(ctx: Context, peer: LangGraphPeer, theirs: dict[str, Any], ours: dict[str, Any], final: int, goals: dict[str, float]) -> None:
    """The rows of one peer next to AgentFSSaver (`ours`: results by durability); `goals`: factors by operation."""
    label = peer.label
    note = f"peer fsyncs: {FSYNCS[peer.name]}"

    def row(metric: str, durability: str, key: str, stat: Callable[[list[float]], float] = median, note: str = note) -> None:
        mine = stat(ours[durability][key]) if ours[durability] else None
        if durability == "power" and stat is median and key in goals:
            at_most(ctx, W, metric, mine, label, stat(theirs[key]), goals[key], note)
        else:
            fig(ctx, W, metric, mine, label, stat(theirs[key]), note=note)

    for durability, how in (("power", "fsync"), ("process", "durability=process")):
        row(f"put median (ms), AgentFSSaver {how}", durability, "put")
    for durability, how in (("power", "fsync"), ("process", "durability=process")):
        row(f"put p99 (ms), AgentFSSaver {how}", durability, "put", p99)
    for durability, how in (("power", "fsync"), ("process", "durability=process")):
        row(f"put_writes median (ms), AgentFSSaver {how}", durability, "put_writes")
    row("get_tuple latest median (ms)", "power", "get_tuple", note="")
    row(f"list(limit={LIST_LIMIT}) median (ms)", "power", "list", note="")
    n = len(theirs["put"])
    size = ours["power"]["size"] / final if ours["power"] else None
    fig(ctx, W, f"store size / final state (x), {n} steps", size, label, theirs["size"] / final, "AgentFSSaver < 10x", lambda v: v < 10)
    if theirs["files"] is not None:
        files = ours["power"]["files"] if ours["power"] else None
        fig(ctx, W, f"files on disk (count), {n}-step thread", files, label, theirs["files"], note="counted before close")
