"""Everything the CLI prints on stdout goes through here, so a closed pipe is one clean exception."""

from __future__ import annotations

import datetime as dt
import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from tqdm import tqdm

SUMMARY_WIDTH = 80


class StdoutClosed(Exception):
    """The reader of stdout went away (e.g. `agentfs cat ... | head -c 10`)."""


def line(text: str = "") -> None:
    """One line of text; names are checked, but metadata and writer fields may come from another
    machine, so control characters (a newline, a terminal escape) are printed escaped."""
    if not text.isprintable():
        text = "".join(ch if ch.isprintable() else ch.encode("unicode_escape").decode("ascii") for ch in text)
    _write(text + "\n")


def _write(text: str) -> None:
    try:
        sys.stdout.write(text)
    except BrokenPipeError:
        raise StdoutClosed from None


def write_bytes(data: bytes) -> None:
    try:
        sys.stdout.buffer.write(data)
    except BrokenPipeError:
        raise StdoutClosed from None


def flush() -> None:
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        raise StdoutClosed from None


def silence() -> None:
    """Point stdout at /dev/null: Python flushes it again at exit, and that flush must not fail."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def emit_json(document: Any) -> None:
    """One JSON document on stdout; values JSON has no type for become their repr()."""
    _write(json.dumps(jsonable(document), indent=2, default=repr) + "\n")  # JSON escapes control characters itself


def jsonable(value: Any) -> Any:
    """`value` with every mapping key made one JSON accepts (json.dumps would raise on a tuple key)."""
    if isinstance(value, dict):
        return {_key(key): jsonable(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(item) for item in value]
    return value


def _key(key: Any) -> Any:
    return key if key is None or isinstance(key, (str, int, float, bool)) else repr(key)


def summary(metadata: dict[str, Any]) -> str:
    """`key=value ...` on one line, cut to SUMMARY_WIDTH characters."""
    text = " ".join(
        f"{key}={value if isinstance(value, str) else json.dumps(jsonable(value), default=repr)}" for key, value in metadata.items()
    )
    return text if len(text) <= SUMMARY_WIDTH else text[: SUMMARY_WIDTH - 3] + "..."


def count(number: int, noun: str) -> str:
    """`1 checkpoint`, `2 checkpoints`: the noun in the singular, made plural by an s."""
    return f"{number} {noun}" if number == 1 else f"{number} {noun}s"


def size(count: int) -> str:
    if count < 1024:
        return f"{count} B"
    value = float(count)
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        value /= 1024
        if value < 1024 or unit == "TiB":
            break
    return f"{value:.1f} {unit}"


def when(moment: dt.datetime) -> str:
    """Human form: UTC to the millisecond."""
    return moment.strftime("%Y-%m-%d %H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def iso(moment: dt.datetime) -> str:
    """JSON form: ISO 8601 with offset, which datetime.fromisoformat reads on every supported Python."""
    return moment.isoformat(timespec="microseconds")


def table(rows: list[list[str]]) -> None:
    """Rows in left-aligned columns two spaces apart; the last column is not padded."""
    if not rows:
        return
    widths = [max(len(row[column]) for row in rows) for column in range(len(rows[0]) - 1)]
    for row in rows:
        cells = [cell.ljust(width) for cell, width in zip(row[:-1], widths, strict=True)]
        line("  ".join([*cells, row[-1]]).rstrip())


@contextmanager
def byte_progress(title: str, *, enabled: bool) -> Iterator[Callable[[int, int], None]]:
    """A `progress(done, total)` callback drawing a byte bar titled `title` on stderr: only on a terminal and when
    `enabled` (not --quiet), as the sync commands' bars."""
    with tqdm(total=0, unit="B", unit_scale=True, desc=title, disable=not (enabled and sys.stderr.isatty())) as bar:

        def progress(done: int, total: int) -> None:
            bar.total = total
            bar.update(done - bar.n)

        yield progress
