"""Atomic, durable file writes: temp file in tmp/, fsync, rename, directory fsync."""

from __future__ import annotations

import os
import secrets
from pathlib import Path


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def temp_path(tmp_dir: Path, suffix: str = ".tmp") -> Path:
    return tmp_dir / f"{secrets.token_hex(12)}{suffix}"


def write_temp(tmp_dir: Path, data: bytes | memoryview, *, sync: bool) -> Path:
    """Write `data` to a new file in `tmp_dir`; fsync it when `sync`."""
    path = temp_path(tmp_dir)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
    return path


def publish(temp: Path, final: Path) -> bool:
    """Move `temp` to `final` without replacing an existing file; False if `final` already existed.

    link + unlink instead of rename: rename would silently replace a file another writer published.
    """
    try:
        os.link(temp, final)
    except FileExistsError:
        return False
    finally:
        temp.unlink(missing_ok=True)
    return True


def make_dirs(path: Path, *, sync: bool) -> None:
    """mkdir -p; with `sync`, each directory created is made durable in its parent."""
    if path.is_dir():
        return
    make_dirs(path.parent, sync=sync)
    try:
        path.mkdir()
    except FileExistsError:
        return
    if sync:
        fsync_dir(path.parent)


def write_atomic(tmp_dir: Path, final: Path, data: bytes, *, sync: bool, exclusive: bool = True) -> bool:
    """Durably create `final` holding `data`; False if it already existed (exclusive) ."""
    make_dirs(final.parent, sync=sync)
    temp = write_temp(tmp_dir, data, sync=sync)
    if exclusive:
        created = publish(temp, final)
    else:
        os.replace(temp, final)
        created = True
    if sync and created:
        fsync_dir(final.parent)
    return created
