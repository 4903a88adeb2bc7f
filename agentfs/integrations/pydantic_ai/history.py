"""AgentFSMessageHistory: one Pydantic AI conversation as an agentfs run.

    <prefix>/<conversation>      one run per conversation (see run_names.segment)

A checkpoint's state is `{"messages": [...]}`: the conversation's messages as Pydantic AI's own
`ModelMessagesTypeAdapter` dumps them (JSON mode), so they load back as the same message objects.
The list is one state key, which agentfs cuts with FastCDC: an append stores the new tail chunk,
not the list. Every `append` is one durable checkpoint whose metadata counts the messages, so a
fork at a turn boundary forks that checkpoint and copies nothing.

    history = AgentFSMessageHistory("chat-42", ".agentfs", remote="s3://bucket/agents")
    result = agent.run_sync("hi", message_history=history.messages())
    history.append(result.new_messages())
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any, Literal, TypeVar

from pydantic_ai.messages import ModelMessage, ModelMessagesTypeAdapter

import agentfs

from ...api import EncryptionArg
from ..run_names import open_or_use, segment

PREFIX = "pydantic-ai"
MESSAGES = "messages"
T = TypeVar("T")


class ForkError(agentfs.AgentFSError, ValueError):
    """A fork at a message count the conversation does not have, or onto a conversation that exists."""


class AgentFSMessageHistory:
    """The messages of one Pydantic AI conversation, each append a durable agentfs checkpoint.

    `store` is an open `agentfs.Store` or a path (opened with `remote`, `storage_options`,
    `durability` and `encryption` as in `agentfs.open`; with `remote`, a fresh store resumes what another machine synced).
    """

    def __init__(
        self,
        conversation_id: str,
        store: agentfs.Store | str | os.PathLike[str] = ".agentfs",
        *,
        prefix: str = PREFIX,
        remote: str | None = None,
        storage_options: dict[str, Any] | None = None,
        durability: Literal["power", "process"] | None = None,
        encryption: EncryptionArg = None,
    ) -> None:
        self.store, self._owns_store = open_or_use(
            store, "AgentFSMessageHistory", remote=remote, storage_options=storage_options, durability=durability, encryption=encryption
        )
        self.conversation_id = conversation_id
        self.prefix = prefix
        self.run = self.store.run(f"{prefix}/{segment(conversation_id)}")
        # (checkpoint id, dumped messages) of the last commit made here: the next append extends these instead
        # of decoding the head again. Hazard: never handed out (messages() validates its own copy).
        self._written: tuple[str, list[Any]] = ("", [])

    def __repr__(self) -> str:
        return f"<AgentFSMessageHistory {self.conversation_id!r} in {self.store!r}>"

    def __enter__(self) -> AgentFSMessageHistory:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self._owns_store:
            self.store.close()

    def messages(self) -> list[ModelMessage]:
        """The conversation's messages oldest first, for `agent.run(..., message_history=...)`."""
        return ModelMessagesTypeAdapter.validate_python(self._dumped(self.run.head_id()))

    def __len__(self) -> int:
        head = self.run.latest()
        return 0 if head is None else _count(head)

    def append(self, messages: Sequence[ModelMessage]) -> agentfs.Checkpoint | None:
        """Append `messages` (typically `result.new_messages()`): one durable checkpoint; None if there are none.

        If another writer appended meanwhile, the messages go after its messages (nothing is lost).
        """
        if not messages:
            return None
        new = ModelMessagesTypeAdapter.dump_python(list(messages), mode="json")
        while True:
            head = self.run.head_id()
            dumped = [*self._dumped(head), *new]
            # the conversation's id (which the run name may hold only as a hash) on its first checkpoint, not on
            # every one: some 30 bytes a turn
            metadata = {MESSAGES: len(dumped)} if head is not None else {"conversation_id": self.conversation_id, MESSAGES: len(dumped)}
            try:
                checkpoint = self.run.commit({MESSAGES: dumped}, metadata=metadata, parent=head)
            except agentfs.Conflict:
                continue  # another writer moved the head since the read: append after its messages
            self._written = (checkpoint.id, dumped)
            return checkpoint

    def fork(self, conversation_id: str, *, at: int | None = None) -> AgentFSMessageHistory:
        """A new conversation holding this one's first `at` messages (all of them by default), in the same store.

        Forks the checkpoint that held exactly those messages when there is one (nothing is copied); else
        forks the head and commits the cut list. The two conversations then diverge.
        """
        head = self.run.latest()
        total = 0 if head is None else _count(head)
        keep = total if at is None else at
        if head is None or not 0 < keep <= total:
            raise ForkError(f"conversation {self.conversation_id!r} has {total} messages: cannot fork at {at}")
        fork = AgentFSMessageHistory(conversation_id, self.store, prefix=self.prefix)
        if fork.run.head_id() is not None:
            raise ForkError(f"conversation {conversation_id!r} already exists")
        base = next((cp for cp in self.run.history() if _count(cp) == keep), head)
        try:
            self.run.fork(base.id, fork.run.name)
        except agentfs.Conflict:
            raise ForkError(f"conversation {conversation_id!r} was created meanwhile") from None
        # the fork starts with the base's metadata: one commit names the new conversation (and cuts the list)
        kept = _dumped_of(base)[:keep]
        fork.run.commit({MESSAGES: kept}, metadata={"conversation_id": conversation_id, MESSAGES: keep}, parent=fork.run.head_id())
        return fork

    def once(self, key: str, fn: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """Run a tool's side effect at most once per `key` in this conversation (the run's journal):
        after a crash and resume, a call recorded as done returns its recorded result instead."""
        return self.run.once(key, fn, *args, **kwargs)

    # async twins: the same calls on the store's offload pool

    async def amessages(self) -> list[ModelMessage]:
        return await self.store.to_thread(self.messages)

    async def aappend(self, messages: Sequence[ModelMessage]) -> agentfs.Checkpoint | None:
        return await self.store.to_thread(self.append, messages)

    async def afork(self, conversation_id: str, *, at: int | None = None) -> AgentFSMessageHistory:
        return await self.store.to_thread(lambda: self.fork(conversation_id, at=at))

    def _dumped(self, head: str | None) -> list[Any]:
        if head is None:
            return []
        written_id, dumped = self._written  # one read: another thread may replace it
        return dumped if written_id == head else _dumped_of(self.run.get(head))


def _count(checkpoint: agentfs.Checkpoint) -> int:
    count = checkpoint.metadata.get(MESSAGES)
    return count if isinstance(count, int) else len(_dumped_of(checkpoint))


def _dumped_of(checkpoint: agentfs.Checkpoint) -> list[Any]:
    state = checkpoint.state
    dumped = state.get(MESSAGES) if isinstance(state, dict) else None
    if not isinstance(dumped, list):
        raise agentfs.FormatError(f"checkpoint {checkpoint.id} of run {checkpoint.run!r} is not a Pydantic AI message history")
    return dumped
