"""Checkpoint ids: ULIDs (millisecond time, then 80 random bits), so ids sort by time.

Made here rather than by python-ulid, whose ULID() costs a commit about 3 us (an object, a
policy, an int and a base32 loop): the 80 random bits are drawn as 16 base32 digits at once,
each of the 16 random bytes reduced to 5 bits (256 is a multiple of 32, so each digit is uniform),
and the time's 10 digits are computed once per millisecond.
"""

from __future__ import annotations

import itertools
import os
import threading
import time

from .names import check_id

CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"  # ULID's digits, in ascending order (so ids sort as strings)
TIME_DIGITS, RANDOM_DIGITS = 10, 16
_RANDOM = "".join(CROCKFORD[byte % 32] for byte in range(256)).encode("ascii")  # a random byte -> a uniform digit
_TO_INT = str.maketrans(CROCKFORD, "0123456789abcdefghijklmnopqrstuv")  # int(..., 32)'s digits
_NEXT_DIGIT = dict(itertools.pairwise(CROCKFORD))

_lock = threading.Lock()
_last = ""  # the last id this process made: the next is greater (ids made in one millisecond keep their order)
_time_cache = (-1, "")  # (millisecond, its 10 digits)


def _forget_after_fork() -> None:
    """A forked child must not follow its parent's last id: both would make the same successor."""
    global _lock, _last
    _lock, _last = threading.Lock(), ""


os.register_at_fork(after_in_child=_forget_after_fork)


def new_id(after: str | None = None) -> str:
    """A fresh id, strictly greater than `after` so that the head of a run is the newest commit.

    When the clock is at or behind `after` (a head written by a machine whose clock is ahead), the
    id takes the millisecond after `after`'s, with fresh random bits: two machines resuming from the
    same head still make distinct ids (a deterministic `after + 1` would make the same one). Within
    one millisecond (or while the clock is behind) this process's ids follow its last one: its random
    part plus one, as python-ulid's default does.
    """
    global _last
    with _lock:
        candidate = _time_digits(time.time_ns() // 1_000_000) + _random_digits()
        if candidate[:TIME_DIGITS] <= _last[:TIME_DIGITS]:
            candidate = _successor(_last)
        _last = candidate
    # `after`'s lead stays out of _last: one head from a machine whose clock is an hour ahead would
    # otherwise put every later id of this process, in every run, an hour ahead (tests/format/test_checkpoint_ids.py)
    if after is not None and candidate <= after:
        candidate = _time_digits(milliseconds(after) + 1) + _random_digits()
    return candidate


def milliseconds(checkpoint_id: str) -> int:
    """The id's time: milliseconds since the epoch. InvalidName (a ValueError) if it is not a ULID."""
    return int(check_id(checkpoint_id)[:TIME_DIGITS].translate(_TO_INT), 32)


_TO_INT_BYTES = bytes.maketrans(CROCKFORD.encode("ascii"), b"0123456789abcdefghijklmnopqrstuv")
_DIGIT_PAIRS = [first + second for first in CROCKFORD for second in CROCKFORD]  # 10 bits -> 2 digits
_PAIR_SHIFTS = tuple(range(120, -1, -10))  # 13 pairs: the 26 digits of 130 bits, the top 2 of them zero


def id_bytes(checkpoint_id: str) -> bytes | None:
    """The id's 128 bits, big-endian (a ULID's binary form); None for a 26-digit id past 2^128 (first digit over 7),
    which names.ID lets through and no ULID is."""
    if checkpoint_id[0] > "7":
        return None
    return int(checkpoint_id.encode("ascii").translate(_TO_INT_BYTES), 32).to_bytes(16, "big")


def id_of_bytes(data: bytes) -> str:
    """The 26-digit id of 16 bytes (id_bytes's inverse), two digits a lookup: 3.7 us where base64.b32encode, pure
    Python, took 8 us."""
    number = int.from_bytes(data, "big")
    return "".join([_DIGIT_PAIRS[(number >> shift) & 1023] for shift in _PAIR_SHIFTS])


def id_time_ns(checkpoint_id: str) -> int:
    return milliseconds(checkpoint_id) * 1_000_000


def _time_digits(ms: int) -> str:
    global _time_cache
    cached_ms, digits = _time_cache
    if ms != cached_ms:
        digits = "".join(CROCKFORD[(ms >> shift) & 31] for shift in range(5 * (TIME_DIGITS - 1), -1, -5))
        _time_cache = (ms, digits)
    return digits


def _random_digits() -> str:
    return os.urandom(RANDOM_DIGITS).translate(_RANDOM).decode("ascii")


def _successor(checkpoint_id: str) -> str:
    """The id right after `checkpoint_id`: its random part plus one; past the last, the next millisecond."""
    kept = checkpoint_id.rstrip(CROCKFORD[-1])
    if len(kept) <= TIME_DIGITS:  # every random digit is the greatest: 2**-80 of ids
        return _time_digits(milliseconds(checkpoint_id) + 1) + _random_digits()
    return kept[:-1] + _NEXT_DIGIT[kept[-1]] + CROCKFORD[0] * (len(checkpoint_id) - len(kept))
