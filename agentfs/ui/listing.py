"""The runs page: every run, LangGraph thread and OpenAI Agents session, filtered and paginated; a row's figures are
read only for the rows of the page shown, so the page costs the same at 10 or 10,000 runs (benchmarks: ui runs)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path

import agentfs

from ..format.refs import ref_size
from ..integrations.conversations import SESSION_PREFIX
from ..integrations.langgraph_layout import Layout
from ..integrations.langgraph_threads import DEFAULT_PREFIX, ThreadRuns
from ..integrations.langgraph_view import StoreView
from ..sync.index import PushIndex, synced_dirs
from .lineage import Heads

PAGE = 50
AUDIT_PREFIX = "agentfs-ui/audit/"  # where `agentfs ui --allow-writes` records what people did, per run


@dataclass
class Entry:
    kind: str  # run, thread, session
    name: str  # the run name, thread id or session id
    runs: list[str]  # the runs that hold it
    namespaces: list[str] = field(default_factory=list)  # a thread's checkpoint namespaces ("" is the root graph)


@dataclass
class RemoteSync:
    url: str
    state: str  # "pushed", "N not pushed", "not synced"


@dataclass
class Row:
    entry: Entry
    checkpoints: int
    last_commit: dt.datetime | None
    head_bytes: int
    metadata: dict[str, object]
    diverged: bool
    sync: list[RemoteSync] = field(default_factory=list)


@dataclass
class Listing:
    rows: list[Row]
    page: int
    more: bool
    total: int | None  # None when a metadata filter stopped scanning early
    remotes: list[str]


def entries(store: agentfs.Store, name_filter: str = "") -> tuple[list[str], list[Entry]]:
    """(plain run names, then threads and sessions) whose name holds `name_filter` (any case). The internal runs of
    threads and sessions and the audit runs are not listed; a plain run becomes an Entry only when its page is shown
    (10,000 of them cost a list of names, not 10,000 objects)."""
    names = store.runs()
    hidden = (DEFAULT_PREFIX + "/", SESSION_PREFIX + "/", AUDIT_PREFIX)
    needle = name_filter.lower()
    plain, langgraph_runs = [], []
    sessions: dict[str, list[str]] = {}
    for name in names:  # one pass, one startswith for most names
        if not name.startswith(hidden):
            if not needle or needle in name.lower():
                plain.append(name)
        elif name.startswith(hidden[0]):
            langgraph_runs.append(name)
        elif name.startswith(hidden[1]):
            sessions.setdefault(name.rsplit("/", 1)[0], []).append(name)
    layout = Layout(DEFAULT_PREFIX)
    threads: dict[str, Entry] = {}
    for where in ThreadRuns(store, layout).spaces(langgraph_runs):
        thread = threads.setdefault(where.thread, Entry("thread", where.thread, []))
        thread.runs.append(layout.checkpoints(where))
        thread.namespaces.append(where.ns)
    others = [threads[thread] for thread in sorted(threads)]
    others += [Entry("session", _session_id(store, root, runs), runs) for root, runs in sorted(sessions.items())]
    return plain, [entry for entry in others if not needle or needle in entry.name.lower()]


def _page_of(plain: list[str], others: list[Entry], start: int, stop: int) -> list[Entry]:
    shown = [Entry("run", name, [name]) for name in plain[start:stop]]
    return shown + others[max(0, start - len(plain)) : max(0, stop - len(plain))]


def _session_id(store: agentfs.Store, root: str, runs: list[str]) -> str:
    head = store.run(runs[0]).latest()
    session = head.metadata.get("session_id") if head is not None else None
    return session if isinstance(session, str) else root.rsplit("/", 1)[-1]


class RunsPage:
    def __init__(self, store: agentfs.Store, heads: Heads) -> None:
        self.store = store
        self.heads = heads
        self._metadata: dict[str, tuple[str, dict[str, object]]] = {}  # run -> (its head id, that head's metadata)

    def listing(self, name_filter: str, meta_filter: str, page: int) -> Listing:
        plain, others = entries(self.store, name_filter)
        total = len(plain) + len(others)
        remotes = self._remotes()
        if not meta_filter:
            rows = [self.row(entry, remotes) for entry in _page_of(plain, others, page * PAGE, (page + 1) * PAGE)]
            return Listing(rows, page, total > (page + 1) * PAGE, total, [url for url, _ in remotes])
        candidates = _page_of(plain, others, 0, total)
        key, _, wanted = meta_filter.partition("=")
        matched: list[Entry] = []
        view = StoreView(self.store)  # one look at the segments for every head
        for entry in candidates:  # a metadata filter reads heads in order until the page is full: one manifest each, once
            metadata = self._head_metadata(entry, view)
            if key in metadata and (not wanted or str(metadata[key]) == wanted):
                matched.append(entry)
            if len(matched) > (page + 1) * PAGE:
                break
        rows = [self.row(entry, remotes) for entry in matched[page * PAGE : (page + 1) * PAGE]]
        return Listing(rows, page, len(matched) > (page + 1) * PAGE, None, [url for url, _ in remotes])

    def _head_metadata(self, entry: Entry, view: StoreView) -> dict[str, object]:
        """The metadata of the newest head among the entry's runs, kept per run while its head stays."""
        newest: tuple[str, dict[str, object]] | None = None
        for name in entry.runs:
            head = view.head(name)
            if head is None:
                continue
            cached = self._metadata.get(name)
            if cached is None or cached[0] != head:
                checkpoint = self.store.run(name).latest()
                if checkpoint is None:
                    continue
                cached = self._metadata[name] = (checkpoint.id, checkpoint.metadata)
            newest = cached if newest is None or cached[0] > newest[0] else newest
        return newest[1] if newest else {}

    def _remotes(self) -> list[tuple[str, PushIndex]]:
        if self.store.remote is not None:
            return []
        # store.engine: the per-run count of checkpoints not yet pushed reads each remote's push index (sync/index.py)
        return [((directory / "url").read_text().strip(), PushIndex(directory)) for directory in synced_dirs(self.store.engine)]

    def row(self, entry: Entry, remotes: list[tuple[str, PushIndex]]) -> Row:
        count, newest, size, metadata, diverged = 0, None, 0, {}, False
        pending: dict[str, int] = {url: 0 for url, _ in remotes}
        for name in entry.runs:
            ids = self.store.run(name).ids()
            count += len(ids)
            if not ids:
                continue
            diverged = diverged or len(self.heads.of(name)) > 1
            head = self.store.run(name).latest()
            if head is not None and (newest is None or head.created > newest):
                newest = head.created
                manifest = head.manifest
                size = sum(ref_size(ref) for _fmt, _count, ref in manifest.state.values()) + sum(map(ref_size, manifest.artifacts.values()))
                metadata = head.metadata
            for url, index in remotes:
                pending[url] += sum((name, checkpoint_id) not in index.entries for checkpoint_id in ids)
        sync = [RemoteSync(url, "pushed" if not missing else f"{missing} not pushed") for url, missing in pending.items()]
        return Row(entry, count, newest, size, metadata, diverged, sync)


def remote_label(url: str) -> str:
    """A remote's URL without credentials, for a page."""
    scheme, sep, rest = url.partition("://")
    return scheme + sep + rest.rpartition("@")[2] if sep else Path(url).name
