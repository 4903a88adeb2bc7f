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

import base64
import dataclasses
import json
from collections.abc import Callable
from typing import Any

from strands.types.session import SessionAgent, SessionMessage

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


def as_json(record: Any, where: str, default: Callable[[Any], Any] | None = None) -> Any:
    """`record` as Strands' file repository reads it back from its JSON; a value JSON cannot hold is refused by name.
    `default`: what json.dumps makes of a value it cannot hold (json's `default`)."""
    try:
        return json.loads(json.dumps(record, ensure_ascii=False, default=default))
    except (TypeError, ValueError, RecursionError) as exc:
        raise agentfs.SerializationError(f"strands {where} cannot be stored: {exc}") from None


def record_of(item: Any, where: str) -> Any:
    """as_json(item.to_dict()) for a SessionMessage or SessionAgent, whose to_dict is Strands'
    `encode_bytes_values(dataclasses.asdict(item))`, without that deep copy (the JSON round trip copies all
    of it again; the copy was a fifth of a message's commit): its fields through one round trip that encodes
    each bytes value as encode_bytes_values does, and a nested dataclass as asdict does. One difference: bytes
    in a tuple, which encode_bytes_values leaves for json to refuse, are encoded too. Another class (a subclass
    may override to_dict) goes through its to_dict (tests_strands/test_strands.py compares the two)."""
    names = _FIELDS.get(type(item))
    if names is None:
        return as_json(item.to_dict(), where)
    return as_json({name: getattr(item, name) for name in names}, where, _encoded)


# the field names of the classes record_of takes apart: Strands' own, whose to_dict it matches
_FIELDS = {cls: tuple(field.name for field in dataclasses.fields(cls)) for cls in (SessionMessage, SessionAgent)}


def _encoded(value: Any) -> Any:
    """json.dumps's `default` for record_of: bytes as encode_bytes_values encodes them, a dataclass as asdict makes it."""
    if isinstance(value, bytes):
        return {"__bytes_encoded__": True, "data": base64.b64encode(value).decode()}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return dataclasses.asdict(value)
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def stored(checkpoint: agentfs.Checkpoint, keys: tuple[str, ...]) -> dict[str, Any]:
    """The checkpoint's state if it holds `keys`; anything else in the run is refused by name."""
    state = checkpoint.state
    if not (isinstance(state, dict) and all(key in state for key in keys)):
        raise agentfs.FormatError(f"checkpoint {checkpoint.id} of run {checkpoint.run!r} is not a Strands session checkpoint")
    return state
