"""Workload 9: LangGraph's savers on the growing conversation (issue 4).

The conversation of workload 2, fed to each saver the way LangGraph's loop
does (``peers_langgraph``: ``create_checkpoint``, the whole state in
``channel_values``, ``new_versions`` only for the channels that changed, from
the saver's own ``get_next_version``), and after each ``put`` one
``put_writes`` on the new checkpoint (the task's write of the next message).
Savers: AgentFSSaver on ``agentfs.open(dir)`` (default durability, fsync) and
on ``agentfs.open(dir, durability="process")``; InMemorySaver, SqliteSaver on
a file, ObjectStorageSaver on a local directory.

Per saver: ``put`` median and p99 and ``put_writes`` median over every step;
``get_tuple`` (latest, thread config) and ``list(limit=10)`` medians, sampled
about 100 times over the run, right after that step's writes; on-disk size at
the end divided by the msgpack size of the final state; the files on disk at the end, before the
saver is closed (every file under the saver's directory: for agentfs its config, fixed lock files and
segments; for SQLite the database, its WAL and shared-memory file), next to those that keep one.
"""

from __future__ import annotations

import time
import traceback
from pathlib import Path
from typing import Any

import msgpack

from .. import data
from ..context import Context
from ..peers import Peer, tree_files, tree_size
from ..peers_langgraph import InMemoryPeer, LangGraphPeer, ObjectStoragePeer, SqlitePeer
from .common import agentfs_part, fig, median, p99

W = "9 langgraph savers"
THREAD = "bench-lg"
CONFIG = {"configurable": {"thread_id": THREAD, "checkpoint_ns": ""}}
LIST_LIMIT = 10
SAMPLES = 100  # get_tuple / list samples per saver
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


def drive(peer: Any, states: list[dict[str, Any]], writes: list[dict[str, str]]) -> dict[str, Any]:
    """Run the workload through ``peer``'s saver; latencies (ms) and bytes kept."""
    clock = _Clock(peer.saver)
    peer.saver = clock
    saver = clock.saver
    every = max(1, len(states) // SAMPLES)
    writes_ms: list[float] = []
    get_ms: list[float] = []
    list_ms: list[float] = []
    for i, state in enumerate(states):
        peer.put(THREAD, state["step"], state)
        config = clock.config
        t = time.perf_counter()
        saver.put_writes(config, [("messages", [writes[i]]), ("step", i + 1)], f"task-{i:06d}")
        writes_ms.append((time.perf_counter() - t) * 1000)
        if i % every == every - 1:
            t = time.perf_counter()
            tup = saver.get_tuple(CONFIG)
            get_ms.append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            listed = list(saver.list(CONFIG, limit=LIST_LIMIT))
            list_ms.append((time.perf_counter() - t) * 1000)
            assert tup is not None and tup.config["configurable"]["checkpoint_id"] == config["configurable"]["checkpoint_id"], (
                f"{peer.name}: get_tuple is not the latest checkpoint"
            )
            assert len(listed) == min(LIST_LIMIT, i + 1), f"{peer.name}: list(limit={LIST_LIMIT}) gave {len(listed)}"
    last = saver.get_tuple(CONFIG)
    assert last is not None and last.checkpoint["channel_values"]["messages"] == states[-1]["messages"], f"{peer.name}: bad latest"
    assert [w[1] for w in last.pending_writes] == ["messages", "step"], f"{peer.name}: bad pending writes"
    root = getattr(peer, "root", None)  # InMemorySaver keeps no files
    files = None if root is None else tree_files(root)
    return {"put": clock.put_ms, "put_writes": writes_ms, "get_tuple": get_ms, "list": list_ms, "size": peer.size_on_disk(), "files": files}


def measure(peer: Peer, states: list[dict[str, Any]], writes: list[dict[str, str]]) -> dict[str, Any]:
    t = time.perf_counter()
    try:
        got = drive(peer, states, writes)
    finally:
        peer.close()
    print(f"  ({peer.name}, {peer.durability}: {time.perf_counter() - t:.1f} s)", flush=True)
    return got


def run(ctx: Context) -> None:
    n = ctx.sizes.langgraph_steps
    states = list(data.conversation(n + 1))
    writes = [s["messages"][-1] for s in states[1:]]  # step i's task writes the message of step i + 1
    states = states[:n]
    final = len(msgpack.packb(states[-1]))

    def agentfs_side(durability: str) -> dict[str, Any]:
        return measure(AgentFSPeer(ctx, ctx.new_dir(f"w9-agentfs-{durability}"), durability), states, writes)

    ours = {d: agentfs_part(ctx, W, f"AgentFSSaver ({d})", lambda d=d: agentfs_side(d)) for d in ("power", "process")}

    def ms(d: str, key: str, stat: Any = median) -> float | None:
        got = ours[d]
        return stat(got[key]) if got else None

    size = {d: (got["size"] / final if got else None) for d, got in ours.items()}
    ctx.report.note(
        f"{W}: {n} steps, final state {final:,} bytes of msgpack; one put and one put_writes per step; "
        f"get_tuple (latest) and list(limit={LIST_LIMIT}) sampled every {max(1, n // SAMPLES)} steps; "
        "latency rows have no goal: the peers' durability differs (fsync: "
        + "; ".join(f"{k}: {v}" for k, v in FSYNCS.items())
        + "; AgentFSSaver: default yes, durability=process no)"
    )
    if size["process"] is not None:
        ctx.report.note(f"{W}: AgentFSSaver durability=process keeps {size['process']:.2f}x the final state")
    makers = [InMemoryPeer, SqlitePeer, ObjectStoragePeer]
    for n_peer, make in enumerate(makers):
        try:
            peer = make(ctx.new_dir(f"w9-peer{n_peer}"))
        except Exception as exc:
            ctx.report.note(f"{W}: peer {make.name} cannot run here: {type(exc).__name__}: {exc}")
            continue
        try:
            theirs = measure(peer, states, writes)
        except Exception as exc:  # one peer failing leaves the others' rows
            traceback.print_exc()
            ctx.report.note(f"{W}: peer {make.name} failed: {type(exc).__name__}: {exc}")
            continue
        label = peer.label
        note = f"peer fsyncs: {FSYNCS[make.name]}"
        fig(ctx, W, "put median (ms), AgentFSSaver fsync", ms("power", "put"), label, median(theirs["put"]), note=note)
        fig(ctx, W, "put median (ms), AgentFSSaver durability=process", ms("process", "put"), label, median(theirs["put"]), note=note)
        fig(ctx, W, "put p99 (ms), AgentFSSaver fsync", ms("power", "put", p99), label, p99(theirs["put"]), note=note)
        fig(ctx, W, "put p99 (ms), AgentFSSaver durability=process", ms("process", "put", p99), label, p99(theirs["put"]), note=note)
        fig(ctx, W, "put_writes median (ms), AgentFSSaver fsync", ms("power", "put_writes"), label, median(theirs["put_writes"]), note=note)
        fig(
            ctx,
            W,
            "put_writes median (ms), AgentFSSaver durability=process",
            ms("process", "put_writes"),
            label,
            median(theirs["put_writes"]),
            note=note,
        )
        fig(ctx, W, "get_tuple latest median (ms)", ms("power", "get_tuple"), label, median(theirs["get_tuple"]))
        fig(ctx, W, f"list(limit={LIST_LIMIT}) median (ms)", ms("power", "list"), label, median(theirs["list"]))
        fig(
            ctx,
            W,
            f"store size / final state (x), {n} steps",
            size["power"],
            label,
            theirs["size"] / final,
            "AgentFSSaver < 10x",
            lambda v: v < 10,
        )
        if theirs["files"] is not None:
            files = ours["power"]["files"] if ours["power"] else None
            fig(ctx, W, f"files on disk (count), {n}-step thread", files, label, theirs["files"], note="counted before close")
