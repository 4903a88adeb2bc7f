"""What every framework adapter shares: a run name segment for an arbitrary id, and opening its store.

`segment(id)` is the id itself when it is a valid run name segment (and not `log`, reserved by
agentfs, nor shaped like a hashed one), else `h` and the sha256 of the id: different ids give
different segments, so a session id of any text gets its own run.
"""

from __future__ import annotations

import hashlib
import os
import re
from typing import Any, Literal

import agentfs

from ..api import EncryptionArg

_PLAIN = re.compile(r"[A-Za-z0-9._-]{1,128}")
_HASHED = re.compile(r"h[0-9a-f]{64}")


def segment(text: str) -> str:
    """One run name segment for an arbitrary id; different ids give different segments."""
    if _PLAIN.fullmatch(text) and text not in (".", "..", "log") and not _HASHED.fullmatch(text):
        return text
    return "h" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def plain_id(text: str) -> str | None:
    """The id a segment names when it is the id itself; None for a hashed one (its id is not in the name)."""
    return None if _HASHED.fullmatch(text) else text


def open_or_use(
    store: agentfs.Store | str | os.PathLike[str] | None,
    owner: str,
    *,
    remote: str | None,
    storage_options: dict[str, Any] | None,
    durability: Literal["power", "process"] | None,
    encryption: EncryptionArg = None,
) -> tuple[agentfs.Store, bool]:
    """(the store, whether the adapter opened it and so closes it): `store` itself, or `agentfs.open(store, ...)`
    with `remote`, `storage_options`, `durability` and `encryption` exactly as `agentfs.open` takes them."""
    if isinstance(store, agentfs.Store):
        if remote is not None or storage_options is not None or durability is not None or encryption is not None:
            raise ValueError(f"remote, storage_options, durability and encryption apply only when {owner} opens the store")
        return store, False
    opened = agentfs.open(store, remote=remote, storage_options=storage_options, durability=durability or "power", encryption=encryption)
    return opened, True
