"""LangGraph threads as a store holds them, read without LangGraph installed (the CLI shows them).

A thread is several internal runs (see langgraph_layout.py): which generation is current, which
namespaces it has there, and how many checkpoints, counted without the put_writes commits that
follow each checkpoint in its run.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..api import Store
from ..core.checkpoint import Checkpoint
from ..errors import FormatError
from .langgraph_layout import GENERATION, INITIAL_GENERATION, Layout, Namespace, Parsed, decode
from .langgraph_view import StoreView

DEFAULT_PREFIX = "langgraph"


def generation_of(switch: Checkpoint) -> str:
    """The generation a commit of a thread's ctl run switched to."""
    state = switch.state
    generation = state.get("generation") if isinstance(state, dict) else None
    if not isinstance(generation, str) or not GENERATION.fullmatch(generation):
        raise FormatError(f"{switch} does not name a generation")
    return generation


def write_batch_metadata(checkpoint_id: str) -> dict[str, Any]:
    """The agentfs metadata of a put_writes commit in a checkpoints run."""
    return {"checkpoint_id": checkpoint_id, "writes": True}


def is_write_batch(commit: Checkpoint) -> bool:
    return isinstance(commit.metadata, dict) and commit.metadata.get("writes") is True


class ThreadRuns:
    """Where the threads kept under `layout` are in `store`."""

    def __init__(self, store: Store, layout: Layout) -> None:
        self.store = store
        self.layout = layout

    def current(self, thread: str, view: StoreView | None = None) -> tuple[str, str | None]:
        """(current generation of `thread`, the commit of its ctl run that chose it), as `view` sees it (or as now)."""
        control = self.store.run(self.layout.control(thread))
        head = (view or StoreView(self.store)).head(control.name)
        if head is None:
            return INITIAL_GENERATION, None
        return generation_of(control.get(head)), head

    def spaces(
        self, runs: list[str], thread: str | None = None, generation: str | None = None, view: StoreView | None = None
    ) -> list[Namespace]:
        """The namespaces among `runs` of `thread` (or of every thread) in `generation` (or the current one, as `view`
        sees it: default, one look at the store, when a current generation is needed)."""
        root = None if thread is None else self.layout.thread_root(thread) + "/"
        current: dict[str, str] = {}
        spaces = []
        for name in runs:
            parsed = self.layout.parse_checkpoints(name) if root is None or name.startswith(root) else None
            if parsed is None:
                continue
            where = self._named(name, parsed)
            if where.thread not in current and generation is not None:
                current[where.thread] = generation
            elif where.thread not in current:
                view = view or StoreView(self.store)  # one look for every thread's ctl run
                current[where.thread] = self.current(where.thread, view)[0]
            if where.generation == current[where.thread]:
                spaces.append(where)
        return spaces

    def _named(self, name: str, parsed: Parsed) -> Namespace:
        """The namespace a checkpoints run holds; a hashed thread id or namespace is read from its first commit."""
        thread, ns = parsed.thread, parsed.ns
        if thread is None or ns is None:
            run = self.store.run(name)
            meta = run.get(run.ids()[0]).metadata
            thread = meta.get("thread_id") if thread is None and isinstance(meta, dict) else thread
            ns = meta.get("checkpoint_ns") if ns is None and isinstance(meta, dict) else ns
        where = Namespace(thread, parsed.generation, ns) if isinstance(thread, str) and isinstance(ns, str) else None
        if where is None or self.layout.checkpoints(where) != name:
            raise FormatError(f"run {name!r} does not record the thread and namespace its name stands for")
        return where


@dataclass
class ThreadSummary:
    """One thread: its namespaces and checkpoints now, and every internal run it has (retired generations too)."""

    thread: str
    namespaces: list[str] = field(default_factory=list)
    checkpoints: int = 0
    latest: Checkpoint | None = None  # the newest commit of its current checkpoints runs
    runs: list[str] = field(default_factory=list)


def summarize(store: Store, runs: list[str], prefix: str = DEFAULT_PREFIX) -> tuple[list[ThreadSummary], list[str]]:
    """The threads among `runs`, by thread id, and the names of every internal run of the prefix (index runs too)."""
    layout = Layout(prefix)
    head = prefix + "/"
    internal = [name for name in runs if name.startswith(head)]
    threads = ThreadRuns(store, layout)
    found: dict[str, ThreadSummary] = {}
    for where in threads.spaces(internal):
        summary = found.setdefault(where.thread, ThreadSummary(where.thread))
        run = store.run(layout.checkpoints(where))
        commits = [run.get(commit_id) for commit_id in run.ids()]
        summary.namespaces.append(where.ns)
        summary.checkpoints += sum(not is_write_batch(commit) for commit in commits)
        if commits and (summary.latest is None or commits[-1].created > summary.latest.created):
            summary.latest = commits[-1]
    by_root = {layout.thread_root(thread) + "/": summary for thread, summary in found.items()}
    for name in internal:
        segments = name[len(head) :].split("/")
        try:
            thread, end = decode(segments, 0)
        except ValueError:
            continue  # an index run (byrun/...), no thread's
        root = head + "/".join(segments[:end]) + "/"
        if root in by_root:
            by_root[root].runs.append(name)
        elif thread is not None:  # a thread whose current generation is empty (deleted): only leftovers
            by_root[root] = found[thread] = ThreadSummary(thread, runs=[name])
    for summary in found.values():
        summary.namespaces.sort()
    return sorted(found.values(), key=lambda summary: summary.thread), internal
