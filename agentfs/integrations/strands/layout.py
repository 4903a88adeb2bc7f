"""Where a Strands session lives in a store, and what its checkpoints hold (ids through run_names.segment).

    <prefix>/<session>/session                   the session record: `{"session": Session.to_dict()}`
    <prefix>/<session>/agent/<agent>             the agent record: `{"agent": SessionAgent.to_dict()}`
    <prefix>/<session>/messages/<agent>          the agent's messages: each checkpoint one message written,
                                                 `{"message": SessionMessage.to_dict()}`, its id in the metadata
    <prefix>/<session>/multi_agent/<multi_agent> a multi-agent's `serialize_state()`: `{"state": {...}}`

Records are stored as Strands' own `to_dict()` makes them after a JSON round trip (what its file and S3
repositories write and read back: an enum as its value, a tuple as a list), and read with its
`from_dict`. A message's checkpoint holds that message only, so writing one costs one small commit
whatever the conversation's length (as Strands' repositories write one file per message); the agent's
messages are the latest checkpoint of each message id (an update or a repeated id is a later one), in
id order.
"""

from __future__ import annotations

import json
from typing import Any

import agentfs

from ..run_names import segment

PREFIX = "strands"
SESSION = "session"
AGENT = "agent"
MESSAGE = "message"
MESSAGES = "messages"
STATE = "state"


class InvalidId(agentfs.InvalidName):
    """A Strands session, agent or multi-agent id that cannot name a session: empty, `.`/`..`, or with a path separator or NUL."""


def check_id(value: object, kind: str) -> str:
    """`value` if it is a usable id, else InvalidId naming it (Strands' own repositories raise ValueError for a path separator)."""
    if not isinstance(value, str):
        raise InvalidId(f"strands {kind} id must be a str, got {type(value).__name__}: {value!r}")
    if value in ("", ".", "..") or any(bad in value for bad in ("/", "\\", "\x00")):
        raise InvalidId(f"strands {kind} id {value!r} is refused: empty, '.', '..', or with '/', '\\' or NUL")
    return value


def session_root(prefix: str, session_id: str) -> str:
    return f"{prefix}/{segment(check_id(session_id, 'session'))}/"


def session_run(prefix: str, session_id: str) -> str:
    return session_root(prefix, session_id) + SESSION


def agent_run(prefix: str, session_id: str, agent_id: str) -> str:
    return f"{session_root(prefix, session_id)}{AGENT}/{segment(check_id(agent_id, 'agent'))}"


def messages_run(prefix: str, session_id: str, agent_id: str) -> str:
    return f"{session_root(prefix, session_id)}{MESSAGES}/{segment(check_id(agent_id, 'agent'))}"


def multi_agent_run(prefix: str, session_id: str, multi_agent_id: str) -> str:
    return f"{session_root(prefix, session_id)}multi_agent/{segment(check_id(multi_agent_id, 'multi-agent'))}"


def as_json(record: Any, where: str) -> Any:
    """`record` as Strands' file repository reads it back from its JSON; a value JSON cannot hold is refused by name."""
    try:
        return json.loads(json.dumps(record, ensure_ascii=False))
    except (TypeError, ValueError, RecursionError) as exc:
        raise agentfs.SerializationError(f"strands {where} cannot be stored: {exc}") from None


def stored(checkpoint: agentfs.Checkpoint, keys: tuple[str, ...]) -> dict[str, Any]:
    """The checkpoint's state if it holds `keys`; anything else in the run is refused by name."""
    state = checkpoint.state
    if not (isinstance(state, dict) and all(key in state for key in keys)):
        raise agentfs.FormatError(f"checkpoint {checkpoint.id} of run {checkpoint.run!r} is not a Strands session checkpoint")
    return state
