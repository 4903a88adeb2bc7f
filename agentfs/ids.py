"""Checkpoint ids: ULIDs (millisecond time, then 80 random bits), so ids sort by time."""

from __future__ import annotations

from ulid import ULID


def new_id(after: str | None = None) -> str:
    """A fresh id, strictly greater than `after` so that the head of a run is the newest commit."""
    fresh = ULID()
    if after is not None and str(fresh) <= after:
        return str(ULID.from_int(int(ULID.from_str(after)) + 1))
    return str(fresh)


def id_time_ns(checkpoint_id: str) -> int:
    return int(ULID.from_str(checkpoint_id).milliseconds) * 1_000_000
