"""Content-defined chunking (FastCDC): an edit or an append changes only the chunks around it."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from typing import Protocol

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


class Readable(Protocol):
    def readinto(self, buffer: memoryview) -> int: ...


def cut_stream(params: ChunkParams, stream: Readable) -> Iterator[memoryview]:
    """Chunks of a binary stream; each view is valid only until the next one is produced."""
    for chunk in params.chunker().cut_stream(stream):
        yield chunk.data
