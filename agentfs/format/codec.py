"""The object file: a 5-byte header (magic, format version, codec) and a zstd frame or the raw bytes.

An object's id is the sha256 of its uncompressed bytes, so compression never changes an id.
"""

from __future__ import annotations

import hashlib
import threading

import zstandard

from ..errors import FormatError, IntegrityError

MAGIC = b"AFO"
VERSION = 1
RAW = 0
ZSTD = 1
HEADER_SIZE = 5
# zstd must save at least this fraction to be kept; otherwise the raw bytes are stored
MIN_SAVING = 1 / 32

_local = threading.local()


def _compressor() -> zstandard.ZstdCompressor:
    # ZstdCompressor is not safe to share between threads
    if not hasattr(_local, "compressor"):
        _local.compressor = zstandard.ZstdCompressor(level=3)
        _local.decompressor = zstandard.ZstdDecompressor()
    return _local.compressor


def _decompressor() -> zstandard.ZstdDecompressor:
    _compressor()
    return _local.decompressor


def hash_bytes(data: bytes | memoryview) -> bytes:
    return hashlib.sha256(data).digest()


def encode(data: bytes | memoryview) -> bytes:
    """The object file's bytes for `data`."""
    if len(data) >= 64:
        packed = _compressor().compress(data)
        if len(packed) <= len(data) * (1 - MIN_SAVING):
            return MAGIC + bytes((VERSION, ZSTD)) + packed
    return MAGIC + bytes((VERSION, RAW)) + bytes(data)


def decode(blob: bytes | memoryview, oid: bytes, where: str) -> bytes:
    """The verified uncompressed bytes of an object file; `where` names it in errors."""
    if len(blob) < HEADER_SIZE:
        raise IntegrityError(f"object {oid.hex()} at {where} is truncated ({len(blob)} bytes)")
    if bytes(blob[:3]) != MAGIC:
        raise IntegrityError(f"object {oid.hex()} at {where} has a bad header")
    if blob[3] != VERSION:
        raise FormatError(f"object {oid.hex()} at {where} has format version {blob[3]}, this agentfs reads {VERSION}")
    codec = blob[4]
    body = memoryview(blob)[HEADER_SIZE:]
    if codec == RAW:
        data = bytes(body)
    elif codec == ZSTD:
        try:
            data = _decompressor().decompress(body)
        except zstandard.ZstdError as exc:
            raise IntegrityError(f"object {oid.hex()} at {where} does not decompress: {exc}") from None
    else:
        raise FormatError(f"object {oid.hex()} at {where} has unknown codec {codec}")
    if hash_bytes(data) != oid:
        raise IntegrityError(f"object {oid.hex()} at {where} does not match its hash (corrupt)")
    return data
