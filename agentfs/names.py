"""Run and artifact names: checked before any byte is written, so no name can escape the store."""

from __future__ import annotations

import re

from .errors import InvalidName

SEGMENT = re.compile(r"[A-Za-z0-9._-]+")
MAX_SEGMENT = 128
MAX_NAME = 1024


def check_name(name: object, kind: str = "run") -> str:
    """Return `name` if it is `/`-separated segments of [A-Za-z0-9._-], else raise InvalidName."""
    if not isinstance(name, str):
        raise InvalidName(f"{kind} name must be a str, got {type(name).__name__}: {name!r}")
    if not name:
        raise InvalidName(f"{kind} name is empty")
    if len(name) > MAX_NAME:
        raise InvalidName(f"{kind} name {name[:40]!r}... is {len(name)} characters (max {MAX_NAME})")
    for segment in name.split("/"):
        if not segment:
            raise InvalidName(f"{kind} name {name!r} has an empty segment (leading, trailing or double '/')")
        if segment in (".", ".."):
            raise InvalidName(f"{kind} name {name!r} has a {segment!r} segment")
        if segment == "log" and kind == "run":  # format 1 kept entries in runs/<run>/log/; still reserved (docs/FORMAT.md)
            raise InvalidName(f"run name {name!r} has a 'log' segment, which is reserved")
        if len(segment) > MAX_SEGMENT:
            raise InvalidName(f"{kind} name {name!r} has a segment over {MAX_SEGMENT} characters")
        if not SEGMENT.fullmatch(segment):
            bad = next(ch for ch in segment if not SEGMENT.fullmatch(ch))
            raise InvalidName(f"{kind} name {name!r} contains {bad!r}; allowed: A-Z a-z 0-9 . _ - and '/' between segments")
    return name


def check_id(checkpoint_id: object) -> str:
    """Checkpoint ids are 26-character Crockford base32 ULIDs."""
    if not isinstance(checkpoint_id, str) or not ID.fullmatch(checkpoint_id):
        raise InvalidName(f"checkpoint id {checkpoint_id!r} is not a 26-character ULID")
    return checkpoint_id


ID = re.compile(r"[0-9A-HJKMNP-TV-Z]{26}")
