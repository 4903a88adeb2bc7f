"""Turso's AgentFS Python SDK (PyPI ``agentfs-sdk``, import name ``agentfs_sdk``).

No clash with our ``agentfs`` package: the SDK imports as ``agentfs_sdk``
(over ``turso``, from PyPI ``pyturso``, a Rust SQLite rewrite). Its API is
async only (``AgentFS.open(AgentFSOptions(path=...))``, ``agent.kv.set/get/
list/delete`` with JSON values, ``agent.fs.write_file/read_file/readdir``
storing files as 4 KiB rows), so each peer drives its own event loop. Every
SDK write commits a transaction, and a commit fsyncs (seen with strace).
One SDK default to know: ``AgentFSOptions(id="x")`` puts its database in
``./.agentfs/x.db``, the directory name of our own default store.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Coroutine
from pathlib import Path
from typing import Any, TypeVar

from .peers import Peer, State, tree_size

T = TypeVar("T")


class _TursoPeer(Peer):
    durability = "power"

    def __init__(self, root: Path) -> None:
        from agentfs_sdk import AgentFS, AgentFSOptions

        root.mkdir(parents=True, exist_ok=True)
        self.root = root
        self.loop = asyncio.new_event_loop()
        self.agent = self._run(AgentFS.open(AgentFSOptions(path=str(root / "agent.db"))))

    def _run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(coro)

    def size_on_disk(self) -> int:
        return tree_size(self.root)

    def close(self) -> None:
        self._run(self.agent.close())
        self.loop.close()


class TursoKvPeer(_TursoPeer):
    """One KV key per step (``thread/0000000042``), the state as its JSON value."""

    name = "Turso agentfs-sdk KV"

    def put(self, thread: str, step: int, state: State) -> None:
        self._run(self.agent.kv.set(f"{thread}/{step:010d}", state))

    async def _latest(self, thread: str) -> State | None:
        db = self.agent.get_database()
        cur = await db.execute(
            "SELECT key FROM kv_store WHERE key >= ? AND key < ? ORDER BY key DESC LIMIT 1",
            (thread + "/", thread + "0"),
        )
        row = await cur.fetchone()
        return await self.agent.kv.get(row[0]) if row else None

    def get_latest(self, thread: str) -> State | None:
        return self._run(self._latest(thread))


class TursoFilesPeer(_TursoPeer):
    """One file per step (``/thread/0000000042.json``) in the SDK's filesystem."""

    name = "Turso agentfs-sdk files"

    def put(self, thread: str, step: int, state: State) -> None:
        self._run(self.agent.fs.write_file(f"/{thread}/{step:010d}.json", json.dumps(state)))

    async def _latest(self, thread: str) -> State | None:
        try:
            names = await self.agent.fs.readdir(f"/{thread}")
        except Exception:
            return None
        if not names:
            return None
        data = await self.agent.fs.read_file(f"/{thread}/{max(names)}")
        state: State = json.loads(data)
        return state

    def get_latest(self, thread: str) -> State | None:
        return self._run(self._latest(thread))
