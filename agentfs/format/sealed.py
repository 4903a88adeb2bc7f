"""Sealed records, the envelope of log entries, journal and retirement records:

magic (3 bytes) | version (1 byte) | sha256(body) (32 bytes) | body
"""

from __future__ import annotations

import hashlib

from ..errors import FormatError, IntegrityError

HEADER = 4 + 32


def seal(magic: bytes, version: int, body: bytes) -> bytes:
    return magic + bytes((version,)) + hashlib.sha256(body).digest() + body


def unseal(data: bytes, magic: bytes, version: int, what: str, where: str) -> bytes:
    """The body of a `what` ("log entry") read from `where`, refused unless whole and unaltered."""
    if len(data) < HEADER or data[:3] != magic:
        raise IntegrityError(f"{what} {where} is truncated or not a {what} ({len(data)} bytes)")
    if data[3] != version:
        raise FormatError(f"{what} {where} has format version {data[3]}, this agentfs reads {version}")
    body = data[HEADER:]
    if hashlib.sha256(body).digest() != data[4:HEADER]:
        raise IntegrityError(f"{what} {where} does not match its checksum (corrupt)")
    return body
