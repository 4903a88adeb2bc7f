"""Content-defined chunking (FastCDC): an edit or an append changes only the chunks around it."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

from pyfastcdc.cy import FastCDC


@dataclasses.dataclass(frozen=True)
class ChunkParams:
    min_size: int
    avg_size: int
    max_size: int

    def chunker(self) -> FastCDC:
        return FastCDC(self.avg_size, min_size=self.min_size, max_size=self.max_size)

    def to_json(self) -> dict[str, int]:
        return dataclasses.asdict(self)


# values: small chunks, since a conversation grows by a few hundred bytes a step
SMALL = ChunkParams(min_size=1024, avg_size=4096, max_size=16384)
# artifacts and values over LARGE_VALUE: fewer, larger files
LARGE = ChunkParams(min_size=65536, avg_size=131072, max_size=786432)
LARGE_VALUE = 4 << 20


def cut_bytes(params: ChunkParams, data: bytes | memoryview) -> Iterator[memoryview]:
    view = memoryview(data)
    for chunk in params.chunker().cut_buf(view):
        yield view[chunk.offset : chunk.offset + chunk.length]


def final_cuts(chunks: int) -> int:
    """How many of the chunks cut_bytes cut from some bytes are cut alike whatever bytes are appended: all but the last.

    FastCDC ends a chunk at the first position (past min_size, before max_size) where its gear hash over the bytes
    from the chunk's start matches a mask (the smaller mask before avg_size), or at max_size, or where the bytes end.
    A chunk that ends before the bytes do ended at a match or at max_size, found from bytes that appending leaves as
    they are, and the next chunk starts where it ended: so each of them but the last is cut alike from longer bytes
    (tests/format/test_chunking.py, test_appending_moves_only_the_last_cut)."""
    return max(chunks - 1, 0)


def cut_block(params: ChunkParams, data: memoryview, ended: bool) -> tuple[list[memoryview], int]:
    """The chunks at the start of `data` (a stream's next bytes) whose cuts are final, and the bytes they cover.

    A cut is final where max_size bytes or more follow its chunk's start (all the chunker looks at) or
    where the stream has `ended`: so a stream read block by block is cut as pyfastcdc's own stream
    chunker cuts it. The bytes past the last final cut (under max_size) begin the next block."""
    chunker = params.chunker().cut_buf(data)
    chunks: list[memoryview] = []
    covered = 0
    while ended or len(data) - covered >= params.max_size:
        chunk = next(chunker, None)
        if chunk is None:
            break
        chunks.append(chunk.data)
        covered += chunk.length
    return chunks, covered
