"""The one walk over what checkpoints need: every object file their refs reach through tree nodes.

gc marks with it, push lists what to upload, pull what to fetch, verify and remote gc what to check
and keep. It is breadth first and asks `read_nodes` for a whole level of tree nodes at once, so a
caller that reads over a network fetches a level concurrently; where the bytes come from (local
files, a remote) and what a node that cannot be read means (a problem, a stop, nothing) is the
caller's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator

from ..errors import AgentFSError
from .refs import LooseRef, Ref, TreeChild, TreeRef

OBJECT, NODE, CHUNK = "object", "node", "chunk"

Children = list[TreeChild]  # a tree node's
ReadNodes = Callable[[list["Reached"]], list["Children | AgentFSError"]]


@dataclasses.dataclass(frozen=True)
class Reached:
    """One object file a ref needs: a loose OBJECT (a value or file in one piece), a tree NODE or a CHUNK."""

    oid: bytes
    role: str
    where: str  # the label of the first ref that reached it, for messages
    depth: int = 0  # a NODE's level above its chunks (1: its children are chunks)
    error: AgentFSError | None = None  # a NODE whose children could not be read: nothing below it was reached


def reach(refs: Iterable[tuple[str, Ref]], read_nodes: ReadNodes, seen: set[bytes]) -> Iterator[Reached]:
    """Every object file `refs` ((label, ref) pairs, as Entry.refs() yields) need, each oid once per `seen`.

    `seen` is extended as the walk goes, so several calls sharing it visit each object once. Nodes of
    one level are yielded, then passed together to `read_nodes`, which returns for each its children
    or the error that stopped reading it; a node with an error is yielded again with `error` set.
    Inline and packed refs live inside log entries and need no object file.
    """
    level: list[Reached] = []
    for label, ref in refs:
        if not isinstance(ref, (LooseRef, TreeRef)) or ref.oid in seen:
            continue
        seen.add(ref.oid)
        if isinstance(ref, LooseRef):
            yield Reached(ref.oid, OBJECT, label)
        else:
            node = Reached(ref.oid, NODE, label, ref.depth)
            yield node
            level.append(node)
    while level:
        below: list[Reached] = []
        for node, children in zip(level, read_nodes(level), strict=True):
            if isinstance(children, AgentFSError):
                yield dataclasses.replace(node, error=children)
                continue
            for child, _size in children:
                if child in seen:
                    continue
                seen.add(child)
                if node.depth == 1:
                    yield Reached(child, CHUNK, node.where)
                else:
                    reached = Reached(child, NODE, node.where, node.depth - 1)
                    yield reached
                    below.append(reached)
        level = below
