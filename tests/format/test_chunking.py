"""FastCDC's cuts under appends: what a growing value's commit relies on to cut only its last chunk again (core/extend.py)."""

from __future__ import annotations

import random

import pytest

from agentfs.format import chunking


def _ends(params: chunking.ChunkParams, data: bytes) -> list[int]:
    ends, end = [], 0
    for chunk in chunking.cut_bytes(params, data):
        end += len(chunk)
        ends.append(end)
    return ends


def _text_like(rng: random.Random, size: int) -> bytes:
    words = [b"agent ", b"tool ", b"result ", b"x" * 50, rng.randbytes(8), b"\x00" * 300]
    out = bytearray()
    while len(out) < size:
        out += rng.choice(words)
    return bytes(out[:size])


@pytest.mark.parametrize("params", [chunking.SMALL, chunking.LARGE], ids=["small", "large"])
def test_appending_moves_only_the_last_cut(params: chunking.ChunkParams) -> None:
    """Cut a prefix of some bytes: its first final_cuts chunks end where the whole bytes' chunks do, whatever the
    prefix's length (random, text-like and runs of one byte, which end chunks at max_size).

    Planted (final_cuts keeping every chunk): the last cut of a prefix is where its bytes end, not a cut of the
    whole, and it fails."""
    rng = random.Random(7)
    for trial in range(12):
        size = rng.randint(params.min_size, 6 * params.max_size)
        data = rng.randbytes(size) if trial % 3 == 0 else _text_like(rng, size)
        whole = set(_ends(params, data))
        for length in [*sorted(rng.sample(range(1, size + 1), 40)), params.min_size, params.max_size]:
            ends = _ends(params, data[:length])
            kept = ends[: chunking.final_cuts(len(ends))]
            assert set(kept) <= whole, f"trial {trial}, prefix of {length} bytes"


def test_no_chunk_is_final_when_there_is_none() -> None:
    assert chunking.final_cuts(0) == 0
    assert chunking.final_cuts(1) == 0
