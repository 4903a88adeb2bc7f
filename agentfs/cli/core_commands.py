"""The local commands: init, runs, log, show, cat, diff, verify."""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from collections.abc import Callable, Mapping
from typing import Any

import agentfs

from ..api import Problem, VerifyReport
from ..errors import NotFound
from ..format.config import encrypted
from ..integrations.langgraph_threads import DEFAULT_PREFIX
from ..integrations.tool_pairs import openai_agents_problems
from ..names import check_name
from ..sync.index import synced_dirs
from ..sync.pack_remote import PackRemote
from ..sync.remote_verify import verify_remote
from ..sync.repair import repair
from . import output, thread_view
from .common import (
    DIFFERENT,
    OK,
    Subparsers,
    UsageError,
    add_json_flag,
    cli_encryption,
    new_store_encryption,
    open_existing,
    remote_url,
    resolve,
    storage_options,
    store_path,
)
from .graph import graph_lines
from .value_diff import value_view

COPY_BLOCK = 1 << 20


def register(subparsers: Subparsers) -> None:
    parser = subparsers.add_parser("init", help="create the store (nothing happens if it exists)")
    parser.add_argument(
        "--encrypt", action="store_true", help="make it encrypted: passphrase from AGENTFS_PASSWORD(_FILE) or a prompt, or --key-file"
    )
    add_json_flag(parser)
    parser.set_defaults(handler=cmd_init)

    parser = subparsers.add_parser("runs", help="list runs with their checkpoint count and head, and LangGraph threads")
    add_json_flag(parser)
    thread_view.add_thread_flags(parser)
    parser.set_defaults(handler=cmd_runs)

    parser = subparsers.add_parser("log", help="a run's (or a LangGraph thread's) checkpoints, newest first; forks are marked")
    parser.add_argument("run", metavar="RUN", help="a run, or with --thread a LangGraph thread id")
    parser.add_argument("--thread", action="store_true", help="RUN is a LangGraph thread id: its checkpoints per namespace")
    parser.add_argument("--langgraph-prefix", default=DEFAULT_PREFIX, metavar="PREFIX", help="where AgentFSSaver keeps threads")
    parser.add_argument("--graph", action="store_true", help="draw the run's lines: two heads mean two machines appended to one parent")
    add_json_flag(parser)
    parser.set_defaults(handler=cmd_log)

    parser = subparsers.add_parser("show", help="one checkpoint: metadata, state keys and artifacts with sizes")
    parser.add_argument("target", metavar="RUN[@ID]", help="a run (its head) or one checkpoint of it")
    parser.add_argument("--state", action="store_true", help="print the decoded state as JSON (with --json: add it as 'value')")
    add_json_flag(parser)
    parser.set_defaults(handler=cmd_show)

    parser = subparsers.add_parser("cat", help="write an artifact's bytes to stdout")
    parser.add_argument("target", metavar="RUN[@ID]")
    parser.add_argument("artifact", metavar="ARTIFACT")
    parser.set_defaults(handler=cmd_cat)

    parser = subparsers.add_parser("diff", help="state keys and artifacts added, removed or changed from A to B (exit 1 if any)")
    parser.add_argument("a", metavar="A", help="RUN[@ID]")
    parser.add_argument("b", metavar="B", help="RUN[@ID]")
    parser.add_argument("--stat", action="store_true", help="names and sizes only, without the changed values")
    add_json_flag(parser)
    parser.set_defaults(handler=cmd_diff)

    parser = subparsers.add_parser("verify", help="re-hash every object and check every checkpoint (exit 1 if any problem)")
    parser.add_argument(
        "--remote", metavar="URL", type=remote_url, help="check this remote instead: every entry decodes and what it uses is there"
    )
    parser.add_argument("--storage-options", metavar="JSON", help="fsspec storage options for --remote, as JSON")
    parser.add_argument(
        "--deep", action="store_true", help="with --remote: also download and re-hash every object (a local verify always re-hashes them)"
    )
    parser.add_argument(
        "--repair",
        action="store_true",
        help="replace corrupt or missing objects, checkpoints and records with verified copies from --remote "
        "(default: every remote this store synced with), then verify",
    )
    add_json_flag(parser)
    parser.set_defaults(handler=cmd_verify)


def cmd_init(args: argparse.Namespace) -> int:
    root = store_path(args)
    created = not (root / "config").is_file()
    encryption = cli_encryption(args, root)
    if args.encrypt and created and encryption is None:
        encryption = new_store_encryption()
    with agentfs.open(root, encryption=encryption) as store:
        if args.json:
            output.emit_json({"path": str(store.root), "id": store.id, "created": created})
        else:
            output.line(f"{'created' if created else 'existing'} agentfs store {store.root} (id {store.id})")
    return OK


def cmd_runs(args: argparse.Namespace) -> int:
    heads: list[tuple[str, int, agentfs.Checkpoint | None]] = []
    with open_existing(args) as store:
        names, threads = thread_view.split(store, args)
        for name in names:
            run = store.run(name)
            heads.append((name, len(run.ids()), run.latest()))  # a damaged head is skipped, with a warning
    if args.json:
        runs = [
            {
                "name": name,
                "checkpoints": count,
                "head": head.id if head else None,
                "head_created": output.iso(head.created) if head else None,
            }
            for name, count, head in heads
        ]
        document: dict[str, Any] = {"runs": runs}
        if threads:  # only then: a store without LangGraph threads reads as it always has
            document["threads"] = [thread_view.thread_json(summary) for summary in threads]
        output.emit_json(document)
        return OK
    if not heads and not threads:
        output.line(f"no runs in {store.root}")
    if heads:
        rows = [[name, str(count), head.id if head else "-", output.when(head.created) if head else "-"] for name, count, head in heads]
        output.table([["RUN", "CHECKPOINTS", "HEAD", "CREATED"], *rows])
    if threads:
        if heads:
            output.line()
        latest = [[output.when(summary.latest.created) if summary.latest else "-"] for summary in threads]
        rows = [thread_view.thread_row(summary) + when for summary, when in zip(threads, latest, strict=True)]
        output.table([[*thread_view.THREAD_HEADER, "LATEST"], *rows])
    return OK


def cmd_log(args: argparse.Namespace) -> int:
    if args.thread:
        with open_existing(args) as store:
            log = thread_view.thread_log(store, args.run, args.langgraph_prefix)
        if args.json:
            output.emit_json(thread_view.thread_log_json(args.run, log))
        else:
            thread_view.print_thread_log(args.run, log)
        return OK
    with open_existing(args) as store:
        run = store.run(args.run)
        history = run.history()
        if not history:
            raise NotFound(f"run {args.run!r} not found: it has no checkpoints")
        heads = run.heads()  # oldest first; a checkpoint prune kept for a fork is no head
        if args.graph and not args.json:
            if len(heads) > 1:
                output.line(f"run {args.run} has diverged: {len(heads)} heads; latest() returns the newest, {heads[-1]}")
            for row in graph_lines(history, set(heads)):
                output.line(row)
            return OK
        children: dict[str | None, list[str]] = defaultdict(list)
        for checkpoint in history:
            children[checkpoint.parent].append(checkpoint.id)
        entries: list[dict[str, Any]] = [
            {
                "id": cp.id,
                "parent": cp.parent,
                "created": cp.created,
                "metadata": cp.metadata,
                "forked_from": _forked_from(cp),
                "siblings": [other for other in children[cp.parent] if other != cp.id],
            }
            for cp in history
        ]
    if args.json:
        checkpoints = [{**entry, "created": output.iso(entry["created"])} for entry in entries]
        output.emit_json({"run": args.run, "heads": heads, "checkpoints": checkpoints})
        return OK
    for index, entry in enumerate(entries):
        marks = ["(head)"] if index == 0 else []
        if entry["siblings"]:
            marks.append(f"(fork: same parent as {', '.join(entry['siblings'])})")
        if entry["forked_from"]:
            marks.append(f"(forked from {entry['forked_from']['run']}@{entry['forked_from']['id']})")
        parent = f"parent {entry['parent']}" if entry["parent"] else "root"
        fields = [entry["id"], output.when(entry["created"]), parent, *marks, output.summary(entry["metadata"])]
        output.line("  ".join(field for field in fields if field))
    return OK


def _forked_from(checkpoint: agentfs.Checkpoint) -> dict[str, str] | None:
    source = checkpoint.forked_from
    return None if source is None else {"run": source[0], "id": source[1]}


def cmd_show(args: argparse.Namespace) -> int:
    with open_existing(args) as store:
        cp = resolve(store, args.target)
        document: dict[str, Any] = {
            "run": cp.run,
            "id": cp.id,
            "parent": cp.parent,
            "created": output.iso(cp.created),
            "writer": cp.writer,
            "forked_from": _forked_from(cp),
            "metadata": cp.metadata,
            "state_kind": cp.state_kind,
            "state": {key: {"size": size} for key, size in cp.value_sizes().items()},
            "artifacts": {name: {"size": artifact.size} for name, artifact in cp.artifacts.items()},
        }
        if args.state:
            document["value"] = cp.state
    if args.json:
        output.emit_json(document)
    elif args.state:
        output.emit_json(document["value"])
    else:
        _print_show(document, cp)
    return OK


def _print_show(document: dict[str, Any], cp: agentfs.Checkpoint) -> None:
    writer = " ".join(f"{key}={value}" for key, value in document["writer"].items())
    rows = [["checkpoint", str(cp)], ["parent", document["parent"] or "- (root)"], ["created", output.when(cp.created)], ["writer", writer]]
    if document["forked_from"]:
        rows.append(["forked from", f"{document['forked_from']['run']}@{document['forked_from']['id']}"])
    rows.append(["metadata", output.summary(document["metadata"]) or "-"])
    output.table(rows)
    state, artifacts = document["state"], document["artifacts"]
    total = sum(item["size"] for item in state.values())
    if document["state_kind"] == "value":
        output.line(f"state: one value, {output.size(total)} (not a mapping with str keys)")
    else:
        output.line(f"state: {len(state)} keys, {output.size(total)}")
        output.table([["  " + key, output.size(item["size"])] for key, item in state.items()])
    output.line(f"artifacts: {len(artifacts)}, {output.size(sum(item['size'] for item in artifacts.values()))}")
    output.table([["  " + name, output.size(item["size"])] for name, item in artifacts.items()])


def cmd_cat(args: argparse.Namespace) -> int:
    with open_existing(args) as store:
        artifact = resolve(store, args.target).artifacts[check_name(args.artifact, "artifact")]
        with artifact.open() as stream:
            while block := stream.read(COPY_BLOCK):
                output.write_bytes(block)
    return OK


def cmd_diff(args: argparse.Namespace) -> int:
    with open_existing(args) as store:
        a, b = resolve(store, args.a), resolve(store, args.b)
        state = _compare(a.value_sizes(), b.value_sizes(), lambda key: a.same_value(key, b))
        artifacts = _compare(_artifact_sizes(a), _artifact_sizes(b), lambda name: a.artifacts[name].same_content(b.artifacts[name]))
        values = [] if args.json or args.stat else value_view(a, b, state)
    same = not any(changes for section in (state, artifacts) for changes in section.values())
    if args.json:
        output.emit_json(
            {"a": {"run": a.run, "id": a.id}, "b": {"run": b.run, "id": b.id}, "same": same, "state": state, "artifacts": artifacts}
        )
    else:
        output.line(f"--- {a}")
        output.line(f"+++ {b}")
        for title, section in (("state", state), ("artifacts", artifacts)):
            rows = [["  +", item["name"], output.size(item["size"])] for item in section["added"]]
            rows += [["  -", item["name"], output.size(item["size"])] for item in section["removed"]]
            rows += [
                ["  ~", item["name"], f"{output.size(item['size_a'])} -> {output.size(item['size_b'])}"] for item in section["changed"]
            ]
            output.line(f"{title}: {'no changes' if not rows else ''}".rstrip())
            output.table(rows)
        if values:
            output.line("values:")
            for line in values:
                output.line("  " + line)
    return OK if same else DIFFERENT


def _artifact_sizes(checkpoint: agentfs.Checkpoint) -> dict[str, int]:
    return {name: artifact.size for name, artifact in checkpoint.artifacts.items()}


def _compare(a: Mapping[str, int], b: Mapping[str, int], same: Callable[[str], bool]) -> dict[str, list[dict[str, Any]]]:
    """Names (with their sizes) only in b, only in a, and in both with other content by `same` (nothing is read;
    the same bytes cut with other chunking parameters show as changed: Checkpoint.same_value)."""
    return {
        "added": [{"name": name, "size": b[name]} for name in sorted(b.keys() - a.keys())],
        "removed": [{"name": name, "size": a[name]} for name in sorted(a.keys() - b.keys())],
        "changed": [{"name": name, "size_a": a[name], "size_b": b[name]} for name in sorted(a.keys() & b.keys()) if not same(name)],
    }


def _with_session_checks(store: agentfs.Store, report: VerifyReport) -> VerifyReport:
    """The store's report, plus each OpenAI Agents session's tool output without its call or call without output."""
    for run, unpaired in openai_agents_problems(store):
        found = f"{unpaired.kind} {unpaired.call_id!r} ({unpaired.item_type}) at item {unpaired.position}"
        detail = f"{found}; AgentFSSession.repair_tool_pairs() removes it"
        report.problems.append(Problem("tool-pairs", run, detail))
    return report


def cmd_verify(args: argparse.Namespace) -> int:
    if args.deep and (args.remote is None or args.repair):
        raise UsageError(
            "verify: --deep goes with --remote URL (it re-hashes the remote's objects; a local verify always re-hashes every object), "
            "not with --repair"
        )
    if args.storage_options is not None and args.remote is None and not args.repair:
        raise UsageError("verify: --storage-options goes with --remote URL or --repair")
    if args.repair:
        with open_existing(args) as store:
            # store.engine: repair and each remote's sync state are sync's (verify --repair is its front-end)
            urls = [args.remote] if args.remote is not None else [(d / "url").read_text() for d in synced_dirs(store.engine)]
            if not urls:
                raise NotFound(f"{store.root} has no remote to repair from: give --remote URL")
            for url in urls:
                repaired = repair(store.engine, PackRemote(url, storage_options(args.storage_options)))
                for what in repaired.replaced:
                    print(f"agentfs: repaired {what} from {url}", file=sys.stderr)
                for why in repaired.unrepaired:
                    print(f"agentfs: warning: not repaired: {why}", file=sys.stderr)
            report = _with_session_checks(store, store.verify())
    elif args.remote is not None:
        remote = PackRemote(args.remote, storage_options(args.storage_options))
        if encrypted(remote.identify()) is not None:  # an encrypted remote is read with its store's keys
            with open_existing(args) as store:
                remote.sealer = store.engine.sealer  # store.engine: the remote's records open with this store's sealer
        report = verify_remote(remote, deep=args.deep, progress=not args.quiet)
    else:
        with open_existing(args) as store, output.byte_progress(f"verify {store.root}", enabled=not args.quiet) as progress:
            report = _with_session_checks(store, store.verify(progress=progress))
    if args.json:
        problems = [{"kind": p.kind, "where": p.where, "detail": p.detail} for p in report.problems]
        output.emit_json({"ok": report.ok, "objects": report.objects, "checkpoints": report.entries, "problems": problems})
    else:
        for problem in report.problems:
            output.line(str(problem))
        verdict = "ok" if report.ok else output.count(len(report.problems), "problem")
        output.line(f"verified {output.count(report.objects, 'object')}, {output.count(report.entries, 'checkpoint')}: {verdict}")
    return OK if report.ok else DIFFERENT
