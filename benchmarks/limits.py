"""The machine's limits, measured in the same run as everything else.

Each function measures one limit and returns plain numbers; ``Limits`` runs
each at most once per run (workloads ask for the ones they compare against)
and ``report`` prints them all.
"""

from __future__ import annotations

import hashlib
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

import zstandard

from .report import Figure

if TYPE_CHECKING:
    from .context import Context

T = TypeVar("T")
CHUNK = 4 * 1024 * 1024
MB = 1_000_000


def percentile(values: list[float], q: float) -> float:
    """The ``q``-th percentile (0..100) by nearest rank."""
    ordered = sorted(values)
    k = max(0, min(len(ordered) - 1, round(q / 100 * len(ordered) + 0.5) - 1))
    return ordered[k]


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def durable_write(directory: Path, name: str, data: bytes) -> None:
    """Write, fsync, rename, directory fsync: one durable small file."""
    tmp = directory / f".{name}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.rename(tmp, directory / name)
    fsync_dir(directory)


def durable_small_write(directory: Path, n: int, size: int = 10_000) -> dict[str, float]:
    """Latency of ``n`` durable writes of ``size``-byte new files (ms)."""
    directory.mkdir(parents=True, exist_ok=True)
    payloads = [os.urandom(size) for _ in range(n)]
    times = []
    for i, data in enumerate(payloads):
        t = time.perf_counter()
        durable_write(directory, f"f{i:06d}", data)
        times.append((time.perf_counter() - t) * 1000)
    return {"median_ms": statistics.median(times), "p99_ms": percentile(times, 99)}


def sequential_write(path: Path, size: int) -> float:
    """MB/s writing ``size`` bytes in 4 MiB blocks, fsync at the end included."""
    block = os.urandom(CHUNK)
    t = time.perf_counter()
    with open(path, "wb") as f:
        left = size
        while left > 0:
            f.write(block[: min(CHUNK, left)])
            left -= CHUNK
        f.flush()
        os.fsync(f.fileno())
    elapsed = time.perf_counter() - t
    path.unlink()
    return size / MB / elapsed


def _chunks(path: Path) -> Any:
    with open(path, "rb") as f:
        while chunk := f.read(CHUNK):
            yield chunk


def zstd_throughput(path: Path, level: int = 3) -> dict[str, float]:
    """zstd compress (one thread, streaming from the file) and decompress, MB/s."""
    size = path.stat().st_size
    comp = zstandard.ZstdCompressor(level=level)
    t = time.perf_counter()
    obj = comp.compressobj()
    out = 0
    for chunk in _chunks(path):
        out += len(obj.compress(chunk))
    out += len(obj.flush())
    c_elapsed = time.perf_counter() - t
    with tempfile.TemporaryFile() as tmp:
        obj = comp.compressobj()
        for chunk in _chunks(path):
            tmp.write(obj.compress(chunk))
        tmp.write(obj.flush())
        tmp.seek(0)
        t = time.perf_counter()
        dobj = zstandard.ZstdDecompressor().decompressobj()
        while chunk := tmp.read(CHUNK):
            dobj.decompress(chunk)
        d_elapsed = time.perf_counter() - t
    return {
        "compress_mbps": size / MB / c_elapsed,
        "decompress_mbps": size / MB / d_elapsed,
        "ratio": size / out,
    }


def zstd_threaded_throughput(path: Path, threads: int, level: int = 3, passes: int = 3) -> float:
    """MB/s of zstd compression on ``threads`` worker threads (``zstd -3 -T2``),
    streaming from the file as a store would: the best of ``passes``, as for the
    large-artifact commit compared with it (the machine is shared: one pass may
    lose a core to another process, in either)."""
    size = path.stat().st_size
    best = float("inf")
    for _ in range(passes):
        obj = zstandard.ZstdCompressor(level=level, threads=threads).compressobj()
        t = time.perf_counter()
        for chunk in _chunks(path):
            obj.compress(chunk)
        obj.flush()
        best = min(best, time.perf_counter() - t)
    return size / MB / best


def sha256_throughput(path: Path) -> float:
    size = path.stat().st_size
    h = hashlib.sha256()
    t = time.perf_counter()
    for chunk in _chunks(path):
        h.update(chunk)
    h.digest()
    return size / MB / (time.perf_counter() - t)


def s3_small_puts(fs: Any, bucket: str, payloads: list[bytes], workdir: Path) -> dict[str, float]:
    """s3fs ``put_file`` of one small file per object, sequentially; then all at once
    with s3fs's own batching (``put`` of a list). Objects per second."""
    src = workdir / "s3-small"
    src.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, data in enumerate(payloads):
        p = src / f"cp{i:06d}.bin"
        p.write_bytes(data)
        paths.append(p)
    t = time.perf_counter()
    for i, p in enumerate(paths):
        fs.put_file(str(p), f"{bucket}/seq/cp{i:06d}.bin")
    seq = len(paths) / (time.perf_counter() - t)
    t = time.perf_counter()
    fs.put([str(p) for p in paths], [f"{bucket}/batch/{p.name}" for p in paths])
    batch = len(paths) / (time.perf_counter() - t)
    fs.rm(f"{bucket}/seq", recursive=True)
    fs.rm(f"{bucket}/batch", recursive=True)
    return {"sequential_per_s": seq, "batched_per_s": batch}


def s3_large_put(fs: Any, bucket: str, path: Path) -> float:
    """MB/s of s3fs ``put_file`` of one large file (its multipart upload)."""
    size = path.stat().st_size
    t = time.perf_counter()
    fs.put_file(str(path), f"{bucket}/large.bin")
    elapsed = time.perf_counter() - t
    fs.rm(f"{bucket}/large.bin")
    return size / MB / elapsed


class Limits:
    """Runs each limit at most once per run, on the run's own data."""

    def __init__(self, ctx: Context) -> None:
        self.ctx = ctx
        self.results: dict[str, Any] = {}
        self.dir = ctx.workdir / "limits"
        self.dir.mkdir(parents=True, exist_ok=True)

    def _once(self, key: str, fn: Callable[[], T]) -> T:
        if key not in self.results:
            self.results[key] = fn()
        return cast(T, self.results[key])

    def floor(self) -> dict[str, float]:
        n = self.ctx.sizes.floor_writes
        return self._once("floor", lambda: durable_small_write(self.dir / "floor", n))

    def seq_write(self) -> float:
        size = self.ctx.sizes.seq_write_mb * 1024 * 1024
        return self._once("seq", lambda: sequential_write(self.dir / "seq.bin", size))

    def zstd(self) -> dict[str, float]:
        return self._once("zstd", lambda: zstd_throughput(self.ctx.big_file()))

    def zstd_2_threads(self) -> float:
        return self._once("zstd2", lambda: zstd_threaded_throughput(self.ctx.big_file(), threads=2))

    def sha256(self) -> float:
        return self._once("sha256", lambda: sha256_throughput(self.ctx.big_file()))

    def s3_small(self) -> dict[str, float]:
        def run() -> dict[str, float]:
            moto = self.ctx.moto()
            bucket = moto.bucket("limits").removeprefix("s3://")
            payloads = self.ctx.small_checkpoint_payloads()
            return s3_small_puts(moto.fs(), bucket, payloads, self.dir)

        return self._once("s3_small", run)

    def s3_large(self) -> float:
        def run() -> float:
            moto = self.ctx.moto()
            bucket = moto.bucket("limits").removeprefix("s3://")
            return s3_large_put(moto.fs(), bucket, self.ctx.big_file())

        return self._once("s3_large", run)


def report(ctx: Context) -> None:
    """Measure every limit and add it to the report."""
    lim, s, add = ctx.limits, ctx.sizes, ctx.report.add
    w = "limits"
    floor = lim.floor()
    add(Figure(w, f"durable 10 KB file write, median (ms), n={s.floor_writes}", None, "machine", floor["median_ms"], is_limit=True))
    add(Figure(w, "durable 10 KB file write, p99 (ms)", None, "machine", floor["p99_ms"], is_limit=True))
    add(Figure(w, f"sequential write {s.seq_write_mb} MiB + fsync (MB/s)", None, "machine", lim.seq_write(), is_limit=True))
    z = lim.zstd()
    big = f"{s.big_mb} MiB mixed"
    add(
        Figure(
            w,
            f"zstd -3 compress, {big}, 1 thread (MB/s)",
            None,
            "machine",
            z["compress_mbps"],
            is_limit=True,
            note=f"compression ratio {z['ratio']:.2f}",
        )
    )
    add(Figure(w, f"zstd -3 compress, {big}, 2 threads (MB/s)", None, "machine", lim.zstd_2_threads(), is_limit=True))
    add(Figure(w, f"zstd decompress, {big} (MB/s)", None, "machine", z["decompress_mbps"], is_limit=True))
    add(Figure(w, f"sha256, {big} (MB/s)", None, "machine", lim.sha256(), is_limit=True))
    s3 = lim.s3_small()
    add(
        Figure(
            w,
            f"s3fs put_file to moto, {s.push_small} x 4 KB, sequential (objects/s)",
            None,
            "machine",
            s3["sequential_per_s"],
            is_limit=True,
        )
    )
    add(Figure(w, f"s3fs put of the same {s.push_small} files, batched (objects/s)", None, "machine", s3["batched_per_s"], is_limit=True))
    add(Figure(w, f"s3fs put_file to moto, one {s.big_mb} MiB file (MB/s)", None, "machine", lim.s3_large(), is_limit=True))
