"""AgentFSSession: the OpenAI Agents SDK's `Session` protocol over agentfs runs (see layout.py).

- Every call that changes the items (`add_items`, `pop_item`, `clear_session`, creating a
  branch) is one checkpoint of the branch's run: read the head, edit its items, commit with
  `parent=` the head read, and on `Conflict` (another process or machine appended meanwhile)
  edit the new head's items again. Nothing one writer added is lost to another.
- Branches are forks: `create_branch_from_turn(n)` forks the newest checkpoint that holds exactly
  the items before turn n, so no item is copied. The current branch is this object's own
  pointer (as in the SDK's AdvancedSQLiteSession); it starts at `main`.
- Every protocol call is async: the store's blocking calls run on its offload pool (`_off_loop`),
  which a cancelled caller waits for.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import time
from collections.abc import Callable
from typing import Any, Literal, NamedTuple, TypeVar, cast

from agents.items import TResponseInputItem
from agents.memory.session_settings import SessionSettings, coerce_session_settings, resolve_session_limit

import agentfs

from ...api import EncryptionArg
from ...serialization import copy_value
from ..run_names import open_or_use
from . import turns as derived
from .layout import MAIN, Entry, branch_run, entries_of, is_user_message, preview, session_root, texts, turn_positions
from .turns import USAGE, Unpaired, Usage

T = TypeVar("T")
Edit = Callable[[list[Entry]], "tuple[list[Entry], T] | None"]
UsageEdit = Callable[[Usage, list[Entry]], Usage]
PREFIX = "openai-agents"


class BranchError(agentfs.AgentFSError, ValueError):
    """A branch or turn that does not exist, or a branch name that is empty or already used."""


class AgentFSSession:
    """Conversation history for the OpenAI Agents SDK, kept as agentfs checkpoints.

    `store` is an open `agentfs.Store` or a path (opened with `remote`, `storage_options`,
    `durability` and `encryption` as in `agentfs.open`; none: $AGENTFS_STORE, else ./.agentfs).
    `session_settings` works as in `SQLiteSession` (its
    `limit` applies when `get_items` is called without one).
    """

    session_id: str
    session_settings: SessionSettings | None

    def __init__(
        self,
        session_id: str,
        store: agentfs.Store | str | os.PathLike[str] | None = None,
        *,
        prefix: str = PREFIX,
        remote: str | None = None,
        storage_options: dict[str, Any] | None = None,
        durability: Literal["power", "process"] | None = None,
        session_settings: SessionSettings | dict[str, Any] | None = None,
        encryption: EncryptionArg = None,
    ) -> None:
        self.store, self._owns_store = open_or_use(
            store,
            "AgentFSSession",
            remote=remote,
            storage_options=storage_options,
            durability=durability,
            encryption=encryption,
        )
        self.session_id = session_id
        self.session_settings = coerce_session_settings(session_settings) if session_settings is not None else SessionSettings()
        self.prefix = prefix
        self.current_branch = MAIN
        # (run, checkpoint id, entries) of the last commit made here: the next change of that run edits these
        # instead of decoding them again. Hazard: they are never handed out (get_items decodes its own copy),
        # and add_items stores copies of the caller's items, so no caller can mutate them
        # (test_items_changed_by_their_caller_after_add_items_stay_as_added).
        self._written = _Written("", "", [], 0, {}, 0)
        self._runs: dict[str, agentfs.Run] = {}

    def __repr__(self) -> str:
        return f"<AgentFSSession {self.session_id!r} on {self.current_branch!r} in {self.store!r}>"

    @property
    def run(self) -> agentfs.Run:
        """The agentfs run of the current branch: its history, forks and sync work as for any run."""
        return self._run(self.current_branch)

    def close(self) -> None:
        if self._owns_store:
            self.store.close()

    # the Session protocol

    async def get_items(self, limit: int | None = None, branch_id: str | None = None) -> list[TResponseInputItem]:
        """The items of the current branch (or `branch_id`) oldest first; with a limit, the newest `limit`."""
        session_limit = resolve_session_limit(limit, self.session_settings)
        items = [item for _added, item in await self._off_loop(self._entries, branch_id or self.current_branch)]
        if session_limit is None or session_limit < 0:  # a negative limit is no limit, as SQLite's LIMIT
            return items
        return items[-session_limit:] if session_limit else []

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Append `items` to the current branch: one checkpoint."""
        if not items:
            return
        copied = copy_value(items, "items")  # as the store will give them back; one it cannot store is refused here
        now = int(time.time())
        await self._off_loop(self._append, self.current_branch, [[now, item] for item in copied])

    async def pop_item(self) -> TResponseInputItem | None:
        """Remove and return the newest item of the current branch (one checkpoint); None if it has none."""

        def pop(entries: list[Entry]) -> tuple[list[Entry], TResponseInputItem] | None:
            return (entries[:-1], entries[-1][1]) if entries else None

        return await self._off_loop(self._change, self.current_branch, "pop_item", pop)

    async def clear_session(self) -> None:
        """Empty every branch of the session (a checkpoint each: the history stays) and switch to `main`."""

        def clear(entries: list[Entry]) -> tuple[list[Entry], None] | None:
            return ([], None) if entries else None

        for branch in await self._off_loop(self._branch_heads):
            await self._off_loop(self._change, branch, "clear_session", clear, lambda _usage, _entries: {})
        self.current_branch = MAIN

    # branches (the SDK's AdvancedSQLiteSession calls that map onto runs and forks)

    async def create_branch_from_turn(self, turn_number: int, branch_name: str | None = None) -> str:
        """A new branch holding the items before user turn `turn_number` (from 1); switches to it."""
        if branch_name is not None and not branch_name.strip():
            raise BranchError(f"session {self.session_id!r}: branch name cannot be empty")
        name = await self._off_loop(self._branch_from_turn, self.current_branch, turn_number, branch_name)
        self.current_branch = name
        return name

    async def create_branch_from_content(self, search_term: str, branch_name: str | None = None) -> str:
        """`create_branch_from_turn` at the first user turn whose text contains `search_term`."""
        matches = await self.find_turns_by_content(search_term)
        if not matches:
            raise BranchError(f"session {self.session_id!r}: no user turn contains {search_term!r}")
        return await self.create_branch_from_turn(matches[0]["turn"], branch_name)

    async def switch_to_branch(self, branch_id: str) -> None:
        if not await self._off_loop(self._exists, branch_id):
            raise BranchError(f"session {self.session_id!r}: branch {branch_id!r} does not exist")
        self.current_branch = branch_id

    async def delete_branch(self, branch_id: str, force: bool = False) -> None:
        """Delete a branch's run (its checkpoints, once no other branch needs them); `force` allows the current one."""
        if not branch_id.strip():
            raise BranchError(f"session {self.session_id!r}: branch name cannot be empty")
        if branch_id == MAIN:
            raise BranchError(f"session {self.session_id!r}: the {MAIN!r} branch cannot be deleted")
        if branch_id == self.current_branch and not force:
            raise BranchError(f"session {self.session_id!r}: {branch_id!r} is the current branch; switch first or pass force=True")
        if not await self._off_loop(self._exists, branch_id):
            raise BranchError(f"session {self.session_id!r}: branch {branch_id!r} does not exist")
        await self._off_loop(self._run(branch_id).delete)
        if branch_id == self.current_branch:
            self.current_branch = MAIN

    async def list_branches(self) -> list[dict[str, Any]]:
        """Each branch with items: branch_id, message_count, user_turns, is_current, created_at."""
        return await self._off_loop(self._list_branches)

    async def get_conversation_turns(self, branch_id: str | None = None) -> list[dict[str, Any]]:
        """Each user turn of the branch: turn, content (cut to 100 characters), full_content, timestamp, can_branch."""
        entries = await self._off_loop(self._entries, branch_id or self.current_branch)
        return [_turn(number, entries[index], 100) for number, index in enumerate(turn_positions(entries), 1)]

    async def find_turns_by_content(self, search_term: str, branch_id: str | None = None) -> list[dict[str, Any]]:
        """The user turns whose text contains `search_term` (ASCII case-insensitive, as the SDK's)."""
        pattern = re.compile(re.escape(search_term), re.IGNORECASE | re.ASCII)
        entries = await self._off_loop(self._entries, branch_id or self.current_branch)
        return [
            _turn(number, entries[index], None)
            for number, index in enumerate(turn_positions(entries), 1)
            if any(pattern.search(text) for text in texts(entries[index][1].get("content")))
        ]

    # usage and turns (as the SDK's AdvancedSQLiteSession has them; see turns.py)

    async def store_run_usage(self, result: Any) -> None:
        """Record `result.context_wrapper.usage` for the current user turn of the current branch: one checkpoint.

        Call it after `Runner.run()`; a later call for the same turn replaces its record. No user turn: nothing.
        """
        usage = getattr(getattr(result, "context_wrapper", None), "usage", None)
        if usage is None:
            return
        record = derived.usage_record(usage)

        def current_turn(entries: list[Entry]) -> tuple[list[Entry], None] | None:
            return (entries, None) if turn_positions(entries) else None

        def record_it(usage: Usage, entries: list[Entry]) -> Usage:
            return {**usage, str(len(turn_positions(entries))): record}

        await self._off_loop(self._change, self.current_branch, "store_run_usage", current_turn, record_it)

    async def get_session_usage(self, branch_id: str | None = None) -> dict[str, int] | None:
        """Requests and tokens summed over every turn of `branch_id` (or of every branch), with total_turns; None if none."""
        branches = [branch_id] if branch_id else list(await self._off_loop(self._branch_heads))
        return derived.session_totals([(await self._off_loop(self._branch, branch))[1] for branch in branches])

    async def get_turn_usage(
        self, user_turn_number: int | None = None, branch_id: str | None = None
    ) -> list[dict[str, Any]] | dict[str, Any]:
        """The usage record of one turn ({} if none), or of every turn with its user_turn_number, oldest first."""
        _entries, usage = await self._off_loop(self._branch, branch_id or self.current_branch)
        if user_turn_number is not None:
            return dict(usage.get(str(user_turn_number), {}))
        return [{"user_turn_number": int(turn), **usage[turn]} for turn in sorted(usage, key=int)]

    async def get_tool_usage(self, branch_id: str | None = None) -> list[tuple[str, int, int]]:
        """(tool name, calls, user turn) for each tool called in each turn of the branch."""
        return derived.tool_usage(await self._off_loop(self._entries, branch_id or self.current_branch))

    async def get_conversation_by_turns(self, branch_id: str | None = None) -> dict[int, list[dict[str, str | None]]]:
        """Each user turn's items as {"type", "tool_name"}, by turn number."""
        return derived.conversation_by_turns(await self._off_loop(self._entries, branch_id or self.current_branch))

    # integrity: tool calls and their outputs

    async def check_tool_pairs(self, branch_id: str | None = None) -> list[Unpaired]:
        """Tool outputs without their call and calls without their output in the branch (empty: sound)."""
        return derived.find_unpaired(await self._off_loop(self._entries, branch_id or self.current_branch))

    async def repair_tool_pairs(self, branch_id: str | None = None) -> list[Unpaired]:
        """Remove the unpaired items `check_tool_pairs` finds: one checkpoint (the one before it keeps them,
        restorable by a fork). Returns what was removed."""

        def repair(entries: list[Entry]) -> tuple[list[Entry], list[Unpaired]] | None:
            unpaired = derived.find_unpaired(entries)
            if not unpaired:
                return None
            dropped = {finding.position for finding in unpaired}
            return [entry for position, entry in enumerate(entries) if position not in dropped], unpaired

        return await self._off_loop(self._change, branch_id or self.current_branch, "repair_tool_pairs", repair) or []

    # blocking work, run off the event loop

    async def _off_loop(self, call: Callable[..., T], *args: Any) -> T:
        """Run a blocking store call on the store's pool (aio.py), so the event loop keeps serving other tasks.

        Hazard: a worker thread cannot be stopped, so a caller cancelled once the call started waits for it to
        finish before the cancellation reaches it (as the SDK's own sessions do); one cancelled before it started
        drops it: a change is then committed or not begun, never still landing behind the caller's back.
        """
        return await self.store.engine.offload.to_end(call, *args)

    def _run(self, branch: str) -> agentfs.Run:
        run = self._runs.get(branch)
        if run is None:
            run = self._runs[branch] = self.store.run(branch_run(self.prefix, self.session_id, branch))
        return run

    def _entries(self, branch: str) -> list[Entry]:
        head = self._run(branch).latest()
        return [] if head is None else entries_of(head)

    def _metadata(self, branch: str, operation: str, entries: list[Entry]) -> dict[str, Any]:
        return self._counted(branch, operation, len(entries), _turns(entries))

    def _counted(self, branch: str, operation: str, items: int, turns: int) -> dict[str, Any]:
        return {"session_id": self.session_id, "branch": branch, "operation": operation, "items": items, "turns": turns}

    def _branch(self, branch: str) -> tuple[list[Entry], Usage]:
        run = self._run(branch)
        written = self._written_branch(run, run.head_id())
        return written.entries, written.usage

    def _append(self, branch: str, added: list[Entry]) -> None:
        """add_items: one checkpoint whose items are the head's with `added` appended, stored as an `Extend`
        (the commit encodes and stores the new items only, whatever the branch's length)."""
        run = self._run(branch)
        added_turns = _turns(added)
        last = self._written  # one read: another worker thread may replace it
        # this object's last commit to the branch is taken for its head without a look at the segments: the commit
        # checks it under the run lock, and if another writer appended meanwhile (Conflict) the head is read
        head = last.checkpoint_id if last.run == run.name and last.checkpoint_id else run.head_id()
        while True:
            written = self._written_branch(run, head)
            turns = written.turns + added_turns
            metadata = self._counted(branch, "add_items", written.length + len(added), turns)
            state = _state(agentfs.Extend(added), written.usage)
            try:
                checkpoint = run.commit(state, metadata=metadata, parent=head)
            except agentfs.Conflict:
                head = run.head_id()  # another writer moved the head: append to the new head instead
                continue
            self._written = written.appended(checkpoint.id, added, turns)
            return

    def _change(self, branch: str, operation: str, edit: Edit[T], usage_edit: UsageEdit | None = None) -> T | None:
        """Apply `edit` to the branch's head items (and `usage_edit` to its usage records, else they are
        carried forward) and commit the result; None (no commit) if `edit` declines."""
        run = self._run(branch)
        while True:
            head = run.head_id()
            written = self._written_branch(run, head)
            entries, usage = written.entries, written.usage
            edited = edit(entries)
            if edited is None:
                return None
            new_entries, result = edited
            new_usage = usage if usage_edit is None else usage_edit(usage, new_entries)
            metadata = self._metadata(branch, operation, new_entries)
            # items the edit left as they were (store_run_usage) are the head's list extended by nothing: the commit
            # stores what the usage changed, not the whole list again, whatever the session's length
            items = agentfs.Extend([]) if new_entries is entries else new_entries
            try:
                checkpoint = run.commit(_state(items, new_usage), metadata=metadata, parent=head)
            except agentfs.Conflict:
                continue  # another writer moved the head since the read: edit its items instead
            self._written = _Written(run.name, checkpoint.id, new_entries, len(new_entries), new_usage, metadata["turns"])
            return result

    def _written_branch(self, run: agentfs.Run, head: str | None) -> _Written:
        """The head's entries, usage records and turn count, without decoding them when this object wrote that head itself."""
        if head is None:
            return _Written(run.name, "", [], 0, {}, 0)
        written = self._written  # one read: another worker thread may replace it
        if (written.run, written.checkpoint_id) == (run.name, head):
            return written
        checkpoint = run.get(head)
        entries = entries_of(checkpoint)
        return _Written(run.name, head, entries, len(entries), _usage_of(checkpoint), _turns(entries))

    def _branch_heads(self) -> dict[str, agentfs.Checkpoint]:
        """The head of every branch of the session, here or on the remote, by branch name."""
        root = session_root(self.prefix, self.session_id) + "/"
        heads: dict[str, agentfs.Checkpoint] = {}
        for name in self.store.runs():
            head = self.store.run(name).latest() if name.startswith(root) and "/" not in name[len(root) :] else None
            if head is None:
                continue
            branch = head.metadata.get("branch")
            # a fork whose first commit was cut short still carries its source's metadata: not a branch yet
            if isinstance(branch, str) and branch_run(self.prefix, self.session_id, branch) == name:
                heads[branch] = head
        return heads

    def _exists(self, branch: str) -> bool:
        """A branch exists while it holds items (as in the SDK, where a branch is its messages)."""
        head = self._run(branch).latest()
        return head is not None and bool(head.metadata.get("items"))

    def _list_branches(self) -> list[dict[str, Any]]:
        branches = []
        for branch, head in self._branch_heads().items():
            if not head.metadata["items"]:
                continue  # emptied by clear_session: no longer a branch, as in the SDK
            run = self._run(branch)
            first = run.get(run.ids()[0])
            branches.append(
                {
                    "branch_id": branch,
                    "message_count": head.metadata["items"],
                    "user_turns": head.metadata["turns"],
                    "is_current": branch == self.current_branch,
                    "created_at": _timestamp(first.created.timestamp()),
                }
            )
        return sorted(branches, key=lambda branch: branch["created_at"])

    def _branch_from_turn(self, source: str, turn_number: int, branch_name: str | None) -> str:
        run = self._run(source)
        head = run.latest()
        entries = [] if head is None else entries_of(head)
        positions = turn_positions(entries)
        if head is None or not 1 <= turn_number <= len(positions):
            raise BranchError(f"session {self.session_id!r}: turn {turn_number} does not contain a user message in branch {source!r}")
        kept = entries[: positions[turn_number - 1]]
        name = branch_name if branch_name is not None else self._free_name(f"branch_from_turn_{turn_number}_{int(time.time())}")
        base = _newest_prefix(run, kept) or head
        try:
            branch = run.fork(base.id, branch_run(self.prefix, self.session_id, name))
        except agentfs.Conflict:  # the fork's first append found a head: the name was taken meanwhile
            raise BranchError(f"session {self.session_id!r}: branch {name!r} has already been used") from None
        # the fork starts with the base's metadata (its branch name): one commit records the new branch
        usage = {turn: record for turn, record in _usage_of(head).items() if int(turn) < turn_number}
        branch.commit(_state(kept, usage), metadata=self._metadata(name, "create_branch", kept), parent=branch.head_id())
        return name

    def _free_name(self, base: str) -> str:
        name, suffix = base, 1
        while self._run(name).head_id() is not None:
            suffix += 1
            name = f"{base}_{suffix}"
        return name


class _Written(NamedTuple):
    """A branch head this object wrote (or read): its items (the first `length` of `items`), usage records and user turns.

    Hazard: `items` may run on past `length`: `appended` extends it in place (an append costs its own items, not the
    branch's), which a stale `_Written` of an earlier head sharing the list never sees past its own `length`. Only the
    head's own `_Written` is appended to, after its commit, so two never extend one list from the same length
    (test_changes_of_one_session_object_from_concurrent_tasks_keep_every_item)."""

    run: str
    checkpoint_id: str
    items: list[Entry]
    length: int
    usage: Usage
    turns: int

    @property
    def entries(self) -> list[Entry]:
        return self.items if len(self.items) == self.length else self.items[: self.length]

    def appended(self, checkpoint_id: str, added: list[Entry], turns: int) -> _Written:
        """The head committed after this one with `added` appended to its items."""
        items = self.entries
        items.extend(added)
        return _Written(self.run, checkpoint_id, items, self.length + len(added), self.usage, turns)


def _turns(entries: list[Entry]) -> int:
    return sum(1 for _added, item in entries if is_user_message(item))


def _state(entries: list[Entry] | agentfs.Extend, usage: Usage) -> dict[str, Any]:
    """A branch checkpoint's state: the items, and the usage records when there are any."""
    return {"items": entries, USAGE: usage} if usage else {"items": entries}


def _usage_of(checkpoint: agentfs.Checkpoint) -> Usage:
    return checkpoint.value(USAGE) if checkpoint.has_value(USAGE) else {}


def _newest_prefix(run: agentfs.Run, kept: list[Entry]) -> agentfs.Checkpoint | None:
    """The newest checkpoint whose items are the start of `kept`: the fork point that copies least."""
    for checkpoint_id in reversed(run.ids()):
        checkpoint = run.get(checkpoint_id)
        count = checkpoint.metadata.get("items")
        if isinstance(count, int) and count <= len(kept) and entries_of(checkpoint) == kept[:count]:
            return checkpoint
    return None


def _timestamp(seconds: float) -> str:
    """UTC as SQLite's CURRENT_TIMESTAMP writes it, the form the SDK's session returns."""
    return dt.datetime.fromtimestamp(seconds, tz=dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def _turn(number: int, entry: Entry, max_length: int | None) -> dict[str, Any]:
    added, item = entry
    content = cast(dict[str, Any], item).get("content", "")
    timestamp = _timestamp(added)
    return {"turn": number, "content": preview(content, max_length), "full_content": content, "timestamp": timestamp, "can_branch": True}
