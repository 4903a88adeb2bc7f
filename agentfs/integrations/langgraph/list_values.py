"""List channel values kept serialized, so the next version of a list is stored as a delta of its new items.

With LangGraph's JsonPlusSerializer, a list is encoded in one msgpack call (not one per item): msgpack
is self-delimiting, so the previous version is a prefix of the new one item by item exactly when its
items' msgpack, back to back (`Listed.packed` past its array header), is a byte prefix of the new
list's; only the new items are then encoded alone, and a read decodes the kept array in one call.
Hazard: inside an array, None, bytes and bytearray encode as they never do alone ("null", "bytes",
"bytearray" kinds), so a list holding one takes the item-by-item path.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from operator import itemgetter
from typing import Any

from langgraph.checkpoint.base import SerializerProtocol
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer

from ...core.run import Run
from ...errors import FormatError
from . import records

RECENT_LISTS = 64  # serialized list values kept to compare the next version against
MSGPACK = "msgpack"  # the serialized kind of an item JsonPlusSerializer packs as msgpack
RAW = (bytes, bytearray, type(None))  # item types JsonPlusSerializer serializes apart from msgpack when alone
Serialized = list[records.Typed]


class Listed:
    """A list channel's value: its items as stored, as serialized to compare (None if unknown), its delta depth,
    and (`packed`) the compared items as one msgpack array when every one is of the msgpack kind (None otherwise).
    A list read along a chain of deltas packs its array only when asked: each list on the way is kept, and packing
    each would join the whole history's items once per level (test_a_fresh_saver_packs_only_the_list_it_loads)."""

    __slots__ = ("_packed", "depth", "plain", "stored")

    def __init__(self, stored: Serialized, plain: Serialized | None, depth: int, packed: tuple[bytes | None] | None = None) -> None:
        self.stored = stored
        self.plain = plain
        self.depth = depth
        self._packed = packed  # (the array,) once known

    @property
    def packed(self) -> bytes | None:
        if self._packed is None:  # two threads may both pack it: the same bytes
            self._packed = (None if self.plain is None else packed_items(self.plain),)
        return self._packed[0]


class ListValues:
    """The RECENT_LISTS list values last written or read, by (run, commit, channel); safe to share between threads."""

    def __init__(self) -> None:
        self._recent: OrderedDict[tuple[str, str, str], Listed] = OrderedDict()
        self._lock = threading.Lock()

    def encode(
        self, serde: SerializerProtocol, run: Run, written: dict[str, Any], previous: records.Blobs
    ) -> tuple[dict[str, Any], dict[str, Listed]]:
        """State keys for the written channels; a list whose previous version is a prefix of it becomes a delta."""
        state: dict[str, Any] = {}
        lists: dict[str, Listed] = {}
        compare = comparable(serde)
        for channel, value in written.items():
            if type(value) is not list:
                state[records.VALUE + channel] = list(serde.dumps_typed(value))
                continue
            base = previous[channel][1] if channel in previous else None
            known = self.recall(serde, run, base, channel) if base is not None else None
            if known is not None and (known.plain is None or known.depth + 1 >= records.SNAPSHOT_EVERY):
                known = None  # nothing to compare with, or time for a whole copy
            packed = packed_list(compare, value)
            items, count = _compared(compare, value, packed, known)
            if compare is serde:
                stored = items
            elif count is None:
                stored = [serde.dumps_typed(item) for item in value]
            else:  # encrypted: the items that did not change keep their ciphertext, so their chunks repeat
                assert known is not None
                stored = known.stored + [serde.dumps_typed(item) for item in value[count:]]
            if known is None or count is None:
                state[records.ITEMS + channel] = [list(item) for item in stored]
                lists[channel] = Listed(stored, items, 0, (packed,))
            else:
                state[records.DELTA + channel] = [base, count, known.depth + 1, [list(item) for item in stored[count:]]]
                lists[channel] = Listed(stored, items, known.depth + 1, (packed,))
        return state, lists

    def kept(self, run: str, commit_id: str, channel: str) -> Listed | None:
        """The list `channel` holds in a commit if it is among those kept, else None (nothing is read)."""
        key = (run, commit_id, channel)
        with self._lock:
            if key in self._recent:
                self._recent.move_to_end(key)
                return self._recent[key]
        return None

    def recall(self, serde: SerializerProtocol, run: Run, commit_id: str, channel: str) -> Listed | None:
        """The list `channel` holds in a commit; None if it holds the channel whole. A delta's chain is read down to a
        list kept or stored whole (at most 4 * SNAPSHOT_EVERY deltas), then each list on the way up is kept."""
        deltas: list[tuple[str, str, int, int, Serialized]] = []  # (commit id, where, count, depth, items added), newest first
        base = self.kept(run.name, commit_id, channel)
        while base is None:
            if len(deltas) > 4 * records.SNAPSHOT_EVERY:
                raise FormatError(f"{run.name}@{commit_id}: chain of list deltas is too long")
            commit = run.get(commit_id)
            found = records.list_record(commit, channel)
            if found is None:
                if not deltas:
                    return None
                raise FormatError(f"{run.name}@{commit_id}: a list delta's base holds no list for channel {channel!r}")
            key, record = found
            where = f"{commit} channel {channel!r}"
            if key.startswith(records.ITEMS):
                base = self._kept_list(serde, run.name, commit_id, channel, records.whole_list(record, where), 0)
            else:
                base_id, count, depth, added = records.delta(record, where)
                deltas.append((commit_id, where, count, depth, added))
                commit_id = base_id
                base = self.kept(run.name, commit_id, channel)
        for commit_id, where, count, depth, added in reversed(deltas):
            base = self._kept_list(serde, run.name, commit_id, channel, records.extended(base.stored, count, added, where), depth)
        return base

    def _kept_list(self, serde: SerializerProtocol, run: str, commit_id: str, channel: str, stored: Serialized, depth: int) -> Listed:
        known = Listed(stored, stored if comparable(serde) is serde else None, depth)
        self.remember((run, commit_id, channel), known)
        return known

    def remember(self, key: tuple[str, str, str], known: Listed) -> None:
        with self._lock:
            self._recent[key] = known
            if len(self._recent) > RECENT_LISTS:
                self._recent.popitem(last=False)


def comparable(serde: SerializerProtocol) -> SerializerProtocol:
    """A serializer whose bytes are equal when values are: an EncryptedSerializer's, whose ciphertexts never repeat, is inside it."""
    return serde.serde if isinstance(serde, EncryptedSerializer) else serde


def _compared(compare: SerializerProtocol, value: list[Any], packed: bytes | None, known: Listed | None) -> tuple[Serialized, int | None]:
    """(`value`'s items serialized by `compare`, how many of them are `known`'s items, None if not a prefix);
    with both arrays at hand, only the items after the prefix are serialized."""
    if known is None or known.plain is None:
        return [compare.dumps_typed(item) for item in value], None
    count = len(known.plain)
    if packed is not None and known.packed is not None:
        known_items = memoryview(known.packed)[len(records.array_header(count)) :]
        if packed.startswith(known_items, len(records.array_header(len(value)))):
            return known.plain + [compare.dumps_typed(item) for item in value[count:]], count
        return [compare.dumps_typed(item) for item in value], None
    items = [compare.dumps_typed(item) for item in value]
    return items, count if items[:count] == known.plain else None


def packed_list(serde: SerializerProtocol, value: list[Any]) -> bytes | None:
    """`value` as one msgpack array (one call), whose items are each as JsonPlusSerializer encodes it alone;
    None for another serializer or an item it does not encode as msgpack alone."""
    if type(serde).dumps_typed is not JsonPlusSerializer.dumps_typed or any(issubclass(kind, RAW) for kind in set(map(type, value))):
        return None
    try:
        kind, data = serde.dumps_typed(value)
    except TypeError:  # ormsgpack's MsgpackEncodeError: the item-by-item path raises (or falls back) for the item at fault
        return None
    return data if kind == "msgpack" and data.startswith(records.array_header(len(value))) else None


def packed_items(items: Serialized) -> bytes | None:
    """Serialized items as one msgpack array, if every one is of the msgpack kind."""
    # in C (map and itemgetter, not generators): a fresh read packs the whole history's items (1,200 after 300 turns)
    if not all(map(MSGPACK.__eq__, map(itemgetter(0), items))):
        return None
    return records.array_header(len(items)) + b"".join(map(itemgetter(1), items))


def load(serde: SerializerProtocol, listed: Listed) -> list[Any]:
    """The list's items, decoded in one call when its array is kept."""
    if listed.packed is not None and comparable(serde) is serde and type(serde).loads_typed is JsonPlusSerializer.loads_typed:
        # a msgpack array is its items' msgpack back to back: one call decodes them all, each as it would alone
        return serde.loads_typed(("msgpack", listed.packed))  # type: ignore[no-any-return]
    return records.load_items(serde, listed.stored)
