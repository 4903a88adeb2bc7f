"""Decompression bombs: object files whose few KB of zstd decompress (or claim to) to far more than any
object holds, built a MiB at a time so that building one costs no memory; and a child process that decodes
one and reports the peak memory it cost (tests/serialization/test_hostile_decode.py, benchmarks/bombs.py).

    python -m tests.helpers.bombs KIND    print JSON {"kind", "outcome", "peak_over_baseline", "blob_bytes"}

KIND: "forged" (256 MiB of zeros, declared in the frame, under a wrong oid), "valid" (the same under its own
sha256), "unsized" (the same without a declared size), "claims_tib" (a frame header declaring 1 TiB).
"""

from __future__ import annotations

import hashlib
import json
import struct
import sys
from collections.abc import Callable, Sized

import zstandard

from agentfs.format import codec

BOMB_SIZE = 256 << 20
KINDS = ("forged", "valid", "unsized", "claims_tib")
_STEP = 1 << 20


def _zeros_frame(size: int, declared: bool) -> bytes:
    compressor = zstandard.ZstdCompressor(level=3, write_content_size=declared)
    stream = compressor.compressobj(size=size if declared else -1)
    zeros = bytes(_STEP)
    parts = [stream.compress(zeros) for _ in range(size // _STEP)]
    parts.append(stream.flush())
    return b"".join(parts)


def _zeros_oid(size: int) -> bytes:
    digest = hashlib.sha256()
    zeros = bytes(_STEP)
    for _ in range(size // _STEP):
        digest.update(zeros)
    return digest.digest()


def _claims_tib() -> bytes:
    """A zstd frame header declaring 1 TiB (single segment, 8-byte content size), then one 1-byte RLE block."""
    header = struct.pack("<IBQ", 0xFD2FB528, 0b1110_0000, 1 << 40)
    last_rle_block = (1 << 3 | 1 << 1 | 1).to_bytes(3, "little") + b"\0"
    return header + last_rle_block


def bomb(kind: str) -> tuple[bytes, bytes]:
    """(oid, object file bytes) of a bomb of `kind`."""
    prefix = codec.MAGIC + bytes((codec.VERSION, codec.ZSTD))
    if kind == "claims_tib":
        return bytes(32), prefix + _claims_tib()
    oid = _zeros_oid(BOMB_SIZE) if kind == "valid" else hashlib.sha256(b"not the content").digest()
    return oid, prefix + _zeros_frame(BOMB_SIZE, declared=kind != "unsized")


def _status(field: str) -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/self/status")


def peak_after(decode: Callable[[], Sized]) -> str:
    """JSON: what `decode()` did (its result's length or its error), and the peak resident memory it cost over
    what was resident just before (a fresh process: nothing else ran in between)."""
    baseline = _status("VmRSS")
    try:
        outcome = f"decoded {len(decode())} bytes"
    except Exception as exc:  # the test checks which: a bare MemoryError is a failure it must see
        outcome = f"{type(exc).__name__}: {exc}"
    return json.dumps({"outcome": outcome, "peak_over_baseline": _status("VmHWM") - baseline})


def measure(kind: str) -> str:
    """Decode one bomb of `kind` here (peak_after), with the bomb's size."""
    oid, blob = bomb(kind)
    return json.dumps({"kind": kind, "blob_bytes": len(blob), **json.loads(peak_after(lambda: codec.decode(blob, oid, f"bomb {kind}")))})


if __name__ == "__main__":
    print(measure(sys.argv[1]))
