"""Workload 16: `agentfs ui` server time per page (the app called in process through Starlette's test client, so the
figure is the server's: store reads, templates, no network, no browser).

Pages: the runs list at 10,000 runs; a run's page at 100,000 checkpoints next to the same page at 1,000 (flat with
history: within 1.5x); a checkpoint whose state is 5 MB; a diff of two checkpoints of 1,000-message threads. Each is
timed warm (median of the repeats after one first load, which is reported too). The run page is also timed cold, as
its own row with the goal: the first load of a store just opened (its writer closed it), which finds the run's heads
from the sealed segments' lineage records (and reads the manifests of entries no record covers); a run page of a
one-checkpoint store is loaded first, so that neither size's cold row carries the process's one-time costs (the
templates compiled once per process). Quick mode uses smaller sizes.
"""

from __future__ import annotations

from typing import Any

from ..context import Context
from .common import agentfs_part, fig, in_turn, median, timed

W = "17 agentfs ui pages"
GOAL_MS = 300.0
REPEATS = 7


def _client(store: Any) -> Any:
    from starlette.testclient import TestClient

    from agentfs.ui.app import Settings, create_app
    from agentfs.ui.security import COOKIE, Guard

    guard = Guard()
    guard.serve_at("127.0.0.1", 8000)
    client = TestClient(create_app(store, guard, Settings(source="bench")), base_url="http://127.0.0.1:8000")
    client.cookies.set(COOKIE, guard.token)
    return client


def _page_ms(client: Any, path: str) -> tuple[float, float]:
    """(first load ms, median of REPEATS warm loads ms) of one page."""

    def load(_: object) -> None:
        response = client.get(path)
        assert response.status_code == 200, (path, response.status_code, response.text[:300])

    first = timed(load, [0])[0]
    return first, median(timed(load, range(REPEATS)))


def measure(ctx: Context, quick: bool) -> dict[str, tuple[float, float]]:
    af = ctx.agentfs
    assert af is not None
    runs, checkpoints, small, state_bytes, messages = (
        (300, 5_000, 1_000, 1 << 20, 200) if quick else (10_000, 100_000, 1_000, 5 << 20, 1_000)
    )
    found: dict[str, tuple[float, float]] = {}
    primer = af.open(ctx.new_dir("w16-primer"), durability="process")
    primer.run("long").commit({"step": 0})
    assert _client(primer).get("/run?name=long").status_code == 200  # templates compiled: not a cold row's cost
    clients = {}
    for size in (small, checkpoints):
        directory = ctx.new_dir(f"w16-history-{size}")
        writer = af.open(directory, durability="process")
        run = writer.run("long")
        for index in range(size):
            run.commit({"step": index}, metadata={"i": index})
        writer.close()
        store = af.open(directory, durability="process")
        clients[size] = _client(store)
        first = timed(lambda _: clients[size].get("/run?name=long"), [0])[0]  # noqa: B023 called here
        found[f"run page, {size} checkpoints"] = (first, 0.0)
        found[f"run page cold, {size} checkpoints (first load, store just opened)"] = (first, first)
    # the two sizes loaded in turn, so that the machine's load drifts over both alike (2 cores shared here)
    warm: dict[int, list[float]] = {size: [] for size in clients}
    for turn in range(3 * REPEATS):
        for size in in_turn(turn, list(clients)):
            warm[size] += timed(lambda _: clients[size].get("/run?name=long"), [0])  # noqa: B023 called here
    for size, times in warm.items():
        key = f"run page, {size} checkpoints"
        found[key] = (found[key][0], median(times))
    # after the run pages: each app on this store looks at its 10,000 runs in a thread (Heads.warm) for seconds, which
    # a cold row measured meanwhile would share the interpreter with
    many_runs = af.open(ctx.new_dir("w16-runs"), durability="process")
    for index in range(runs):
        many_runs.run(f"agent-{index:05d}").commit({"step": index}, metadata={"team": f"t{index % 7}"})
    found[f"runs list, {runs} runs"] = _page_ms(_client(many_runs), "/")
    found[f"runs list, {runs} runs, metadata filter"] = _page_ms(_client(many_runs), "/?meta=team%3Dt3")
    store = af.open(ctx.new_dir("w16-big"), durability="process")
    blob = "x" * 1000
    big = store.run("big").commit({"records": [{"i": index, "text": blob} for index in range(state_bytes // 1000)], "step": 1})
    found[f"checkpoint page, {state_bytes >> 20} MB state"] = _page_ms(_client(store), f"/checkpoint?run=big&id={big.id}")
    thread = store.run("thread")
    history = [{"role": "user" if index % 2 else "assistant", "content": f"message {index} " + "y" * 200} for index in range(messages)]
    a = thread.commit({"messages": history, "step": 1})
    b = thread.commit({"messages": [*history[:-10], *({"role": "assistant", "content": f"edited {i}"} for i in range(10))], "step": 2})
    found[f"diff, two {messages}-message threads"] = _page_ms(_client(store), f"/diff?a_run=thread&a={a.id}&b={b.id}")
    return found


def run(ctx: Context) -> None:
    measured = agentfs_part(ctx, W, "pages", lambda: measure(ctx, ctx.quick))
    if measured is None:
        return
    for page, (first, warm) in measured.items():
        if "cold" in page:
            fig(ctx, W, f"{page}: server ms", first, goal=f"<= {GOAL_MS:.0f} ms", met=lambda v: v <= GOAL_MS)
            continue
        fig(
            ctx,
            W,
            f"{page}: server ms (warm median)",
            warm,
            goal=f"<= {GOAL_MS:.0f} ms",
            met=lambda v: v <= GOAL_MS,
            note=f"first load {first:.0f} ms",
        )
    runs = [key for key in measured if key.startswith("run page,")]
    if len(runs) == 2:
        small, large = (measured[key][1] for key in runs)
        fig(ctx, W, f"{runs[1]} / {runs[0]} (flat with history)", large / small, goal="<= 1.5x", met=lambda v: v <= 1.5)
    cold = [key for key in measured if key.startswith("run page cold")]
    if len(cold) == 2:
        small, large = (measured[key][0] for key in cold)
        ratio = large / small
        fig(ctx, W, "run page cold: the larger run / the smaller (flat with history)", ratio, goal="<= 1.5x", met=lambda v: v <= 1.5)
