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
# No object is larger than this, uncompressed: the largest a writer makes is a chunk of chunking.LARGE (768 KiB);
# packed objects are at most refs.PACK_MAX, tree nodes at most 512 children (about 23 KiB)
# (tests/serialization/test_hostile_decode.py checks these). A reader refuses a larger object before decompressing it, so a
# crafted frame (8 KB declaring 256 MiB, or 1 TiB) costs at most this much memory, whatever its hash.
MAX_OBJECT = 1 << 20
MAX_BLOB = HEADER_SIZE + MAX_OBJECT  # an object file: raw bytes are stored only where zstd saves nothing

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
        check_size(blob, oid, where)
        data = bytes(body)
    elif codec == ZSTD:
        data = _decompress(body, oid, where)
    else:
        raise FormatError(f"object {oid.hex()} at {where} has unknown codec {codec}")
    if hasher(data) != oid:
        raise IntegrityError(f"object {oid.hex()} at {where} does not match its hash (corrupt)")
    return data


def check_size(blob: bytes | memoryview, oid: bytes, where: str) -> None:
    """Refuse an object file that holds, or whose zstd frame declares, more than MAX_OBJECT bytes: read
    from its header, nothing decompressed (a remote reader calls it on each object frame it fetches)."""
    if len(blob) < HEADER_SIZE or blob[4] not in (RAW, ZSTD):
        return  # decode() says what is wrong with it
    body = memoryview(blob)[HEADER_SIZE:]
    if blob[4] == RAW:
        size = len(body)
    else:
        try:
            size = zstandard.get_frame_parameters(body).content_size
        except zstandard.ZstdError as exc:
            raise IntegrityError(f"object {oid.hex()} at {where} is not a zstd frame: {exc}") from None
        if size == zstandard.CONTENTSIZE_UNKNOWN:
            return  # _decompress caps its output
    if size > MAX_OBJECT:
        raise IntegrityError(f"object {oid.hex()} at {where} is {size} bytes, over the largest object ({MAX_OBJECT}); refused unread")


def _decompress(frame: memoryview, oid: bytes, where: str) -> bytes:
    """A zstd frame's bytes, at most MAX_OBJECT: a frame declaring more is refused before any allocation
    (zstandard allocates the declared size at once), one declaring no size is decompressed into a buffer
    of MAX_OBJECT and refused if it holds more."""
    try:
        declared = zstandard.get_frame_parameters(frame).content_size
        if declared == zstandard.CONTENTSIZE_UNKNOWN:
            return _decompressor().decompress(frame, max_output_size=MAX_OBJECT)
        if declared > MAX_OBJECT:
            raise IntegrityError(f"object {oid.hex()} at {where} is {declared} bytes, over the largest object ({MAX_OBJECT}); refused")
        return _decompressor().decompress(frame)
    except zstandard.ZstdError as exc:
        raise IntegrityError(f"object {oid.hex()} at {where} does not decompress: {exc}") from None
