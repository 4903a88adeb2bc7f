"""A child process for the depth tests (tests/serialization/test_hostile_decode.py, tests/serialization/test_value_properties.py): a value
too deep for the C stack kills the process that reads it, so each attempt runs here, never in pytest.

    python -m tests.helpers.deep_values commit STORE KIND DEPTH   commit {"v": value}; print the outcome
    python -m tests.helpers.deep_values forge STORE KIND DEPTH    the same with the writer's depth checks off:
                                                                  bytes a hostile or older writer could store
    python -m tests.helpers.deep_values read STORE                read the head's state; print the outcome
    python -m tests.helpers.deep_values mcp STORE                 the MCP server's read_state of key "v"
    python -m tests.helpers.deep_values sweep DIR DEPTH...        commit and read each kind at each depth
    python -m tests.helpers.deep_values forged-sweep DIR DEPTH... forge and read each kind at each depth

Each prints one line per attempt: `ok <depth>` or `<ErrorType>: <message>`. Exit 0 unless something else broke.
"""

from __future__ import annotations

import sys
import tempfile
from typing import Any

import agentfs
from agentfs.serialization import values

KINDS = ("list", "tuple", "dict", "frozenset", "mixed")


def nested(kind: str, depth: int) -> Any:
    """A value `depth` containers deep (a str at the bottom)."""
    value: Any = "bottom"
    for level in range(depth):
        shape = ("list", "tuple", "dict", "frozenset")[level % 4] if kind == "mixed" else kind
        if shape == "list":
            value = [value]
        elif shape == "tuple":
            value = (value,)
        elif shape == "dict":
            value = {"k": value}
        else:
            value = frozenset([value]) if not isinstance(value, (list, dict)) else (value,)
    return value


def commit(root: str, kind: str, depth: int) -> str:
    try:
        agentfs.open(root, durability="process").run("deep").commit({"v": nested(kind, depth)})
    except agentfs.AgentFSError as exc:
        return f"{type(exc).__name__}: {exc}"
    return f"ok {depth}"


def read(root: str) -> str:
    try:
        head = agentfs.open(root).run("deep").latest()
        if head is None:
            return "no checkpoint"
        value = head.state["v"]
    except agentfs.AgentFSError as exc:
        return f"{type(exc).__name__}: {exc}"
    depth = 0
    while not isinstance(value, str):
        value = next(iter(value.values())) if isinstance(value, dict) else next(iter(value))
        depth += 1
    return f"ok {depth}"


def read_state_over_mcp(root: str) -> str:
    from agentfs.integrations.mcp_server import tools  # the MCP SDK is optional: only this mode needs it

    try:
        tools.read_state(agentfs.open(root), tools.StateArguments(checkpoint="deep", key="v"))
    except agentfs.AgentFSError as exc:
        return f"{type(exc).__name__}: {exc}"
    return "ok"


def forge(root: str, kind: str, depth: int) -> str:
    """commit() as a writer without the limits would: the bytes a hostile or careless writer stores."""
    checks = values.too_deep, values.MAX_DEPTH
    values.too_deep = lambda value, limit=0, **_: False  # type: ignore[assignment]
    values.MAX_DEPTH = 1 << 30
    try:
        return commit(root, kind, depth)
    finally:
        values.too_deep, values.MAX_DEPTH = checks


def main(argv: list[str]) -> int:
    mode, root, *rest = argv
    sys.setrecursionlimit(20_000)  # a forged value's pack recurses in Python; readers must not need it
    if mode in ("commit", "forge"):
        print((commit if mode == "commit" else forge)(root, rest[0], int(rest[1])), flush=True)
    elif mode == "read":
        print(read(root), flush=True)
    elif mode == "mcp":
        print(read_state_over_mcp(root), flush=True)
    elif mode in ("sweep", "forged-sweep"):
        write = commit if mode == "sweep" else forge
        for depth in map(int, rest):
            for kind in KINDS:
                with tempfile.TemporaryDirectory(dir=root) as store:
                    print(kind, depth, write(store, kind, depth), read(store), flush=True)
    else:
        raise SystemExit(f"unknown mode {mode!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
