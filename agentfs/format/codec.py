"""The object file: a 5-byte header (magic, format version, codec) and a zstd frame or the raw bytes.

An object's id is the sha256 of its uncompressed bytes, so compression never changes an id.
"""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Callable

import zstandard

from ..errors import FormatError, IntegrityError

MAGIC = b"AFO"
VERSION = 1
RAW = 0
ZSTD = 1
HEADER_SIZE = 5
# zstd must save at least this fraction to be kept; otherwise the raw bytes are stored
MIN_SAVING = 1 / 32
# Objects up to this size (a state value's every chunk, chunking.SMALL.max_size; a small state key) are
# compressed at zstd level 1, larger ones at level 3. Below it a compression's fixed cost dominates and
# level 1 keeps the ratio; measured on the benchmarks' msgpack'd conversation text (zstandard 0.25):
# 10 KB 32 us at level 1 against 49 us at level 3 (4781 against 4819 bytes), 16 KiB 55 against 79 us
# (ratio 0.446 against 0.452), but 32 KiB 0.427 against 0.407: from there level 3 saves bytes.
# Readers are unaffected: a zstd frame decodes the same whatever its level.
SMALL_OBJECT = 16 << 10
SMALL_LEVEL, LARGE_LEVEL = 1, 3
# An object packed into its commit's log entry (a whole value of at most refs.PACK_MAX = SMALL_OBJECT bytes) is
# compressed again by every commit that changes the value, inside the commit; a chunk is compressed once and kept
# by every later checkpoint (a growing value repeats its chunks), so there its bytes weigh more. Packed objects
# take level 1's parameters for 16 KiB but matches of at least 6 bytes (level 1: 5) found through a hash table
# of 2^13 entries (level 1: 2^15). Measured (zstandard 0.25, best of 25 rounds) on the small-commit benchmark's
# 10 KB states: 27.0 us against 31.4 us at level 1, 0.4826 against 0.4750 of the input; in situ 5 us less CPU
# per commit. The 1,000-step conversation packs its value until it outgrows 16 KiB: its store grows by 1.5 KB
# (5.690x -> 5.692x its final state), where the same parameters for its chunks too cost 12 KB.
ENTRY_PARAMETERS = zstandard.ZstdCompressionParameters.from_level(1, source_size=SMALL_OBJECT, min_match=6, hash_log=13)

_local = threading.local()


def _compressor(size: int, in_entry: bool) -> zstandard.ZstdCompressor:
    # ZstdCompressor is not safe to share between threads
    if not hasattr(_local, "small"):
        _local.entry = zstandard.ZstdCompressor(compression_params=ENTRY_PARAMETERS)
        _local.small = zstandard.ZstdCompressor(level=SMALL_LEVEL)
        _local.large = zstandard.ZstdCompressor(level=LARGE_LEVEL)
    if in_entry:
        return _local.entry
    return _local.small if size <= SMALL_OBJECT else _local.large


def _decompressor() -> zstandard.ZstdDecompressor:
    if not hasattr(_local, "decompressor"):
        _local.decompressor = zstandard.ZstdDecompressor()
    return _local.decompressor


def hash_bytes(data: bytes | memoryview) -> bytes:
    return hashlib.sha256(data).digest()


def encode(data: bytes | memoryview, *, in_entry: bool = False) -> bytes:
    """The object file's bytes for `data`; `in_entry`: an object packed into a log entry (see ENTRY_PARAMETERS)."""
    if len(data) >= 64:
        packed = _compressor(len(data), in_entry).compress(data)
        if len(packed) <= len(data) * (1 - MIN_SAVING):
            return MAGIC + bytes((VERSION, ZSTD)) + packed
    return b"".join((MAGIC, bytes((VERSION, RAW)), data))  # one copy of a view (+ bytes() would make two)


Hasher = Callable[[bytes | memoryview], bytes]  # data -> its object id: sha256, or an encrypted store's keyed id


def decode(blob: bytes | memoryview, oid: bytes, where: str, hasher: Hasher = hash_bytes) -> bytes:
    """The verified uncompressed bytes of an object file; `where` names it in errors; `hasher` makes ids."""
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
    if hasher(data) != oid:
        raise IntegrityError(f"object {oid.hex()} at {where} does not match its hash (corrupt)")
    return data
