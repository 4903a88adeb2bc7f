"""A LangGraph thread's messages, tool calls and interrupts at one checkpoint, decoded without running code.

LangGraph's own serializer rebuilds each message by importing the module its record names; `PlainSerde`
reads the same msgpack records into plain dicts (`{"__type__": "module.Class", ...fields}`) and imports
nothing, so a record from a remote cannot make this process load code
(tests/ui/test_ui_conversations.py::test_a_record_naming_a_module_imports_nothing).
"""

from __future__ import annotations

import json
from typing import Any

import msgpack

from ..api import Store
from ..errors import FormatError, NotFound
from .conversations import Conversation, Step, message_of
from .langgraph.saver import AgentFSSaver
from .langgraph_threads import DEFAULT_PREFIX

INTERRUPT = "__interrupt__"
STEPS_SHOWN = 50  # the newest checkpoints of a thread listed as steps: each is read whole
# LangGraph's msgpack extension codes (langgraph.checkpoint.serde.jsonplus): 0-5 hold (module, name, payload, ...)
CONSTRUCTED = range(0, 6)
NUMPY_ARRAY, DELTA_SNAPSHOT = 6, 7


def _ext(code: int, data: bytes) -> Any:
    inner = _unpack(data)
    if code in CONSTRUCTED and isinstance(inner, (list, tuple)) and len(inner) >= 3:
        kind = f"{inner[0]}.{inner[1]}"
        payload = inner[2]
        return {"__type__": kind, **payload} if isinstance(payload, dict) else {"__type__": kind, "value": payload}
    if code == NUMPY_ARRAY:
        return {"__type__": "numpy.ndarray"}
    if code == DELTA_SNAPSHOT:
        return inner
    return {"__type__": f"msgpack extension {code}"}


def _unpack(data: bytes) -> Any:
    return msgpack.unpackb(data, ext_hook=_ext, strict_map_key=False, raw=False)


class PlainSerde:
    """A LangGraph SerializerProtocol that only reads, into plain values; it never imports a module a record names."""

    def dumps_typed(self, obj: Any) -> tuple[str, bytes]:
        raise FormatError("a conversation view does not write LangGraph checkpoints")

    def loads_typed(self, data: tuple[str, bytes]) -> Any:
        kind, body = data
        try:
            if kind == "null":
                return None
            if kind in ("bytes", "bytearray"):
                return bytes(body)
            if kind == "json":
                return json.loads(body)
            if kind == "msgpack":
                return _unpack(body)
        except (ValueError, msgpack.UnpackException, RecursionError) as exc:
            raise FormatError(f"a LangGraph value of type {kind!r} does not decode: {exc}") from None
        return {"__type__": f"unreadable serialization {kind!r}"}


def thread_conversation(
    store: Store, thread: str, *, checkpoint_id: str | None = None, ns: str = "", prefix: str = DEFAULT_PREFIX
) -> Conversation:
    """The messages of `thread` (its "messages" channel) at `checkpoint_id` (default: the latest), with every step and
    the pending interrupts there."""
    saver = AgentFSSaver(store, serde=PlainSerde(), prefix=prefix)  # type: ignore[arg-type]
    config: dict[str, Any] = {"configurable": {"thread_id": thread, "checkpoint_ns": ns}}
    if checkpoint_id:
        config["configurable"]["checkpoint_id"] = checkpoint_id
    found = saver.get_tuple(config)  # type: ignore[arg-type]
    if found is None:
        where = f" at checkpoint {checkpoint_id}" if checkpoint_id else ""
        raise NotFound(f"LangGraph thread {thread!r} (namespace {ns!r}) not found under {prefix!r}{where}")
    values = found.checkpoint.get("channel_values", {})
    raw = values.get("messages", []) if isinstance(values, dict) else []
    messages = [message_of(item) for item in raw] if isinstance(raw, list) else [message_of(raw)]
    pending = found.pending_writes or []
    interrupts = [
        item for _task, channel, value in pending if channel == INTERRUPT for item in (value if isinstance(value, list) else [value])
    ]
    next_nodes = sorted({channel.split(":")[-1] for _task, channel, _value in pending if channel.startswith("branch:to:")})
    steps = []
    listed = list(saver.list({"configurable": {"thread_id": thread, "checkpoint_ns": ns}}, limit=STEPS_SHOWN))  # type: ignore[arg-type]
    by_id = {item.config["configurable"]["checkpoint_id"]: item for item in listed}
    for item in reversed(listed):
        meta = item.metadata if isinstance(item.metadata, dict) else {}
        parent = by_id.get(item.parent_config["configurable"]["checkpoint_id"]) if item.parent_config else None
        writes = sorted({write[1] for write in parent.pending_writes or []}) if parent else []
        seen, before = item.checkpoint.get("versions_seen", {}), parent.checkpoint.get("versions_seen", {}) if parent else {}
        nodes = sorted(node for node, versions in seen.items() if versions != before.get(node))
        steps.append(Step(item.config["configurable"]["checkpoint_id"], meta.get("step"), meta.get("source"), writes, nodes))
    at = found.config["configurable"]["checkpoint_id"]
    return Conversation("thread", thread, at, messages, steps, interrupts, next_nodes)
