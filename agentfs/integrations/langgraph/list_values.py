"""List channel values kept serialized, so the next version of a list is stored as a delta of its new items."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, NamedTuple

from langgraph.checkpoint.base import SerializerProtocol
from langgraph.checkpoint.serde.encrypted import EncryptedSerializer

from ...core.run import Run
from ...errors import FormatError
from . import records

RECENT_LISTS = 64  # serialized list values kept to compare the next version against
Serialized = list[records.Typed]


class Listed(NamedTuple):
    """A list channel's value: its items as stored, as serialized to compare (None if unknown), its delta depth."""

    stored: Serialized
    plain: Serialized | None
    depth: int


class ListValues:
    """The RECENT_LISTS list values last written or read, by (run, commit, channel); safe to share between threads."""

    def __init__(self) -> None:
        self._recent: OrderedDict[tuple[str, str, str], Listed] = OrderedDict()
        self._lock = threading.Lock()

    def encode(
        self, serde: SerializerProtocol, run: Run, written: dict[str, Any], plain: dict[str, Serialized], previous: records.Blobs
    ) -> tuple[dict[str, Any], dict[str, Listed]]:
        """State keys for the written channels; a list whose previous version is a prefix of it becomes a delta."""
        state: dict[str, Any] = {}
        lists: dict[str, Listed] = {}
        for channel, value in written.items():
            if channel not in plain:
                state[records.VALUE + channel] = list(serde.dumps_typed(value))
                continue
            items = plain[channel]
            base = previous[channel][1] if channel in previous else None
            known = self.recall(serde, run, base, channel) if base is not None else None
            count = None
            if known is not None and known.plain is not None and known.depth + 1 < records.SNAPSHOT_EVERY:
                count = len(known.plain) if items[: len(known.plain)] == known.plain else None
            if comparable(serde) is serde:
                stored = items
            elif known is None or count is None:
                stored = [serde.dumps_typed(item) for item in value]
            else:  # encrypted: the items that did not change keep their ciphertext, so their chunks repeat
                stored = known.stored + [serde.dumps_typed(item) for item in value[count:]]
            if known is None or count is None:
                state[records.ITEMS + channel] = [list(item) for item in stored]
                lists[channel] = Listed(stored, items, 0)
            else:
                state[records.DELTA + channel] = [base, count, known.depth + 1, [list(item) for item in stored[count:]]]
                lists[channel] = Listed(stored, items, known.depth + 1)
        return state, lists

    def recall(self, serde: SerializerProtocol, run: Run, commit_id: str, channel: str, hops: int = 0) -> Listed | None:
        """The list `channel` holds in a commit; None if it holds the channel whole."""
        key = (run.name, commit_id, channel)
        with self._lock:
            if key in self._recent:
                self._recent.move_to_end(key)
                return self._recent[key]
        if hops > 4 * records.SNAPSHOT_EVERY:
            raise FormatError(f"{run.name}@{commit_id}: chain of list deltas is too long")
        commit = run.get(commit_id)
        found = records.list_record(commit, channel)
        if found is None:
            return None
        where = f"{commit} channel {channel!r}"
        stored, depth = records.extend(*found, where, lambda base: self._base(serde, run, base, channel, hops + 1))
        known = Listed(stored, stored if comparable(serde) is serde else None, depth)
        self.remember(key, known)
        return known

    def _base(self, serde: SerializerProtocol, run: Run, commit_id: str, channel: str, hops: int) -> Serialized:
        known = self.recall(serde, run, commit_id, channel, hops)
        if known is None:
            raise FormatError(f"{run.name}@{commit_id}: a list delta's base holds no list for channel {channel!r}")
        return known.stored

    def remember(self, key: tuple[str, str, str], known: Listed) -> None:
        with self._lock:
            self._recent[key] = known
            if len(self._recent) > RECENT_LISTS:
                self._recent.popitem(last=False)


def comparable(serde: SerializerProtocol) -> SerializerProtocol:
    """A serializer whose bytes are equal when values are: an EncryptedSerializer's, whose ciphertexts never repeat, is inside it."""
    return serde.serde if isinstance(serde, EncryptedSerializer) else serde
