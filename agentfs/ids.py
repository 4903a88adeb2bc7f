"""Checkpoint ids: ULIDs (millisecond time, then 80 random bits), so ids sort by time."""

from __future__ import annotations

import secrets

from ulid import ULID

RANDOM_BYTES = 10


def new_id(after: str | None = None) -> str:
    """A fresh id, strictly greater than `after` so that the head of a run is the newest commit.

    When the clock is at or behind `after` (a head written by a machine whose clock is ahead), the
    id takes the millisecond after `after`'s, with fresh random bits: two machines resuming from the
    same head still make distinct ids (a deterministic `after + 1` would make the same one).
    """
    fresh = str(ULID())
    if after is None or fresh > after:
        return fresh
    return str(ULID(next_millisecond(after) + secrets.token_bytes(RANDOM_BYTES)))


def next_millisecond(checkpoint_id: str) -> bytes:
    """The 6-byte ULID timestamp one millisecond after `checkpoint_id`'s."""
    return (ULID.from_str(checkpoint_id).milliseconds + 1).to_bytes(6, "big")


def id_time_ns(checkpoint_id: str) -> int:
    return int(ULID.from_str(checkpoint_id).milliseconds) * 1_000_000
