"""Processes with a skewed clock, through libfaketime (Debian package `faketime`; `make test` installs it).

PYTEST_DONT_REWRITE
"""

from __future__ import annotations

import glob
import os

# Debian's multiarch directory (x86_64-linux-gnu, aarch64-linux-gnu, ...)
FOUND = sorted(glob.glob("/usr/lib/*/faketime/libfaketime.so.1"))


def skewed_env(offset: str) -> dict[str, str]:
    """The environment of a process whose wall clock is `offset` (libfaketime syntax: "+1h", "-30s") from ours.

    Hazards for Python: libfaketime caches the offset per process unless FAKETIME_NO_CACHE=1, and a
    faked monotonic clock breaks the timeouts of threading and asyncio (DONT_FAKE_MONOTONIC=1).
    """
    if not FOUND:
        raise RuntimeError("libfaketime.so.1 is missing: install the Debian package faketime (make test does)")
    return {**os.environ, "LD_PRELOAD": FOUND[0], "FAKETIME": offset, "FAKETIME_NO_CACHE": "1", "DONT_FAKE_MONOTONIC": "1"}
