"""Deterministic states and artifacts, derived from (tag, step) alone.

Writer subprocesses commit them; tests recompute them to check every byte that was read back.
Sizes vary on purpose: inline (< 64 B), packed into the log entry (< 16 KiB), and chunked into
loose objects and trees (> 16 KiB, compressible and incompressible), plus artifacts of each kind.
"""

from __future__ import annotations

import random
from typing import Any

_VOCAB_RNG = random.Random(20240601)
WORDS = ["".join(_VOCAB_RNG.choice("etaoinshrdlucmfwypvbgkjqxz") for _ in range(_VOCAB_RNG.randint(2, 9))) for _ in range(1000)]

# a value that is the same in every checkpoint: packed once, then reused from the head's entry
CONFIG = {"model": "test-model", "temperature": 0.5, "system": " ".join(WORDS[:400])}


def text(rng: random.Random, size: int) -> str:
    out: list[str] = []
    length = 0
    while length < size:
        word = rng.choice(WORDS)
        out.append(word)
        length += len(word) + 1
    return " ".join(out)


def make_state(step: int, tag: str = "") -> dict[str, Any]:
    rng = random.Random(f"{tag}/{step}")
    kind = step % 4
    state: dict[str, Any] = {"step": step, "tag": tag, "config": CONFIG}
    if kind == 0:
        state["data"] = step  # inline
    elif kind == 1:
        state["data"] = text(rng, 2_000)  # packed into the entry
        for k in range(8):  # a large entry: many values packed into it
            state[f"note{k}"] = rng.randbytes(rng.randint(4_000, 15_000))
    elif kind == 2:
        state["data"] = rng.randbytes(rng.randint(17_000, 60_000))  # incompressible: loose chunks and a tree
    else:
        state["data"] = text(rng, rng.randint(20_000, 80_000))  # compressible, chunked
    # a conversation that grows for 40 steps, then starts over: chunks shared with earlier checkpoints
    state["messages"] = [
        {"role": "user" if j % 2 else "assistant", "id": j, "text": text(random.Random(f"{tag}/m{j}"), 600)} for j in range(step % 40)
    ]
    return state


def make_artifacts(step: int, tag: str = "") -> dict[str, bytes]:
    if step % 3:
        return {}
    rng = random.Random(f"{tag}/artifact/{step}")
    size = (1_000, 40_000, 300_000)[(step // 3) % 3]  # packed, one loose chunk, a tree of chunks
    return {"out/result.bin": rng.randbytes(size)}


def make_metadata(step: int, tag: str = "") -> dict[str, Any]:
    return {"step": step, "tag": tag}
