"""Deterministic workload data: the same bytes on every run and machine."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

MIB = 1024 * 1024
_CONSONANTS = "bcdfghklmnprstvwz"
_VOWELS = "aeiou"


def vocabulary(size: int = 1000, seed: int = 7) -> list[str]:
    """``size`` distinct pronounceable lower-case words of 2 to 10 letters."""
    rng = random.Random(seed)
    words: set[str] = set()
    out: list[str] = []
    while len(out) < size:
        syllables = rng.choice((1, 2, 2, 3, 3, 4))
        w = "".join(rng.choice(_CONSONANTS) + rng.choice(_VOWELS) for _ in range(syllables))
        if rng.random() < 0.3:
            w += rng.choice(_CONSONANTS)
        if w not in words:
            words.add(w)
            out.append(w)
    return out


VOCAB = vocabulary()


def text(rng: random.Random, nbytes: int) -> str:
    """English-like text of exactly ``nbytes`` ASCII bytes from ``VOCAB``."""
    parts: list[str] = []
    length = 0
    sentence = 0
    while length < nbytes:
        w = rng.choice(VOCAB)
        if sentence == 0:
            w = w.capitalize()
        sentence += 1
        if sentence >= rng.randint(6, 16):
            w += "."
            sentence = 0
        parts.append(w)
        length += len(w) + 1
    return " ".join(parts)[:nbytes]


def scratch(nbytes: int = 10_000, seed: int = 11) -> dict[str, str]:
    """A fixed dict of about ``nbytes`` (the scratch pad of the conversation)."""
    rng = random.Random(seed)
    n = max(1, nbytes // 100)
    return {f"note-{j:03d}": text(rng, 100 - 12) for j in range(n)}


def message(rng: random.Random, i: int) -> dict[str, str]:
    return {
        "role": "user" if i % 2 == 0 else "assistant",
        "id": f"msg-{i:06d}",
        "content": text(rng, 500),
    }


def conversation(steps: int, seed: int = 1) -> Iterator[dict[str, Any]]:
    """States of the growing conversation (issue 2, acceptance 5).

    Step ``i`` is ``{"step": i, "messages": [m0..mi], "scratch": {...}}``:
    one new ~500-byte message per step, scratch a fixed 10 KB dict. Each
    yielded state has its own list object (messages themselves are shared).
    """
    rng = random.Random(seed)
    pad = scratch()
    messages: list[dict[str, str]] = []
    for i in range(steps):
        messages.append(message(rng, i))
        yield {"step": i, "messages": list(messages), "scratch": pad}


def small_state(step: int, nbytes: int = 10_000, seed: int = 3) -> dict[str, Any]:
    """A state of about ``nbytes`` whose content is new at every step."""
    rng = random.Random(seed * 1_000_003 + step)
    n = max(1, nbytes // 1000)
    return {
        "step": step,
        "status": "running",
        "notes": [text(rng, 1000 - 4) for _ in range(n)],
    }


def states(count: int, nbytes: int, seed: int = 3) -> list[dict[str, Any]]:
    """``count`` different states of about ``nbytes`` each (10 KB, 4 KB ...)."""
    return [small_state(i, nbytes, seed) for i in range(count)]


def _text_block(rng: np.random.Generator, nbytes: int) -> bytes:
    idx = rng.integers(0, len(VOCAB), size=nbytes // 5 + 16)
    words = [VOCAB[i] for i in idx.tolist()]
    block = " ".join(words).encode()
    while len(block) < nbytes:  # pragma: no cover - the estimate above is generous
        block += block
    return block[:nbytes]


def write_mixed_file(path: Path, size: int, seed: int = 5, block: int = MIB) -> Path:
    """Write ``size`` bytes of mixed data: 1 MiB blocks, alternately random and text.

    Written block by block, so memory stays at a few MiB whatever the size.
    """
    rng = np.random.default_rng(seed)
    written = 0
    with open(path, "wb") as f:
        n = 0
        while written < size:
            want = min(block, size - written)
            data = rng.bytes(want) if n % 2 == 0 else _text_block(rng, want)
            f.write(data)
            written += want
            n += 1
    return path


def flip_byte(path: Path, offset: int | None = None) -> int:
    """Invert one byte (the middle one by default) in place; returns the offset."""
    size = path.stat().st_size
    pos = size // 2 if offset is None else offset
    with open(path, "r+b") as f:
        f.seek(pos)
        b = f.read(1)
        f.seek(pos)
        f.write(bytes([b[0] ^ 0xFF]))
    return pos
