"""A failing disk (EIO errors name the path and the operation): a store on a
small loop-mounted ext4 whose loop device is cut short under it (LOOP_SET_STATUS64 with a size limit of 1 MiB),
so every read and write of the store's blocks past it fails with EIO in the block layer, as a dying disk's would,
then given its size back. A commit and a read under EIO each fail with one StorageError line naming the segment
and the operation; after the device is healthy again and the file system is mounted afresh (ext4 may have aborted
its journal), every commit that returned reads back, byte for byte, verify is clean and commits go on. Needs root
and loop devices, as tests/engine/test_disk_full.py: skipped (with why) only where they are missing, never when CI is set.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import struct
import subprocess
from pathlib import Path

import pytest

import agentfs
from agentfs.errors import StorageError
from tests.cli.test_cli import cli
from tests.engine.test_disk_full import small_disk  # noqa: F401  (the fixture)

# one xdist worker takes every loop-mounting test (make test: --dist loadgroup), so no two attach loop devices at once
pytestmark = [pytest.mark.timeout(120), pytest.mark.xdist_group("loop-devices")]
ARTIFACT = 200_000  # incompressible bytes per checkpoint
COMMITS = 6
LIMIT = 1 << 20  # bytes the loop device keeps while it fails: ext4's first metadata blocks, none of the store's data
LOOP_SET_STATUS64, LOOP_GET_STATUS64 = 0x4C04, 0x4C05  # linux/loop.h
LOOP_INFO64 = "=5Q4I64s64s32s2Q"  # struct loop_info64; lo_sizelimit is its fifth field


def loop_device(mount: Path) -> str:
    for line in Path("/proc/mounts").read_text().splitlines():
        device, where, *_rest = line.split()
        if where == str(mount):
            return device
    raise AssertionError(f"{mount} is not mounted")


def limit_size(device: str, limit: int) -> None:
    """Give the loop device `limit` bytes (0: its whole backing file): I/O past them fails with EIO, the data stays."""
    fd = os.open(device, os.O_RDONLY)
    try:
        status = bytearray(struct.calcsize(LOOP_INFO64))
        fcntl.ioctl(fd, LOOP_GET_STATUS64, status)
        fields = list(struct.unpack(LOOP_INFO64, status))
        fields[4] = limit
        fcntl.ioctl(fd, LOOP_SET_STATUS64, struct.pack(LOOP_INFO64, *fields))
    finally:
        os.close(fd)


def drop_cached(directory: Path) -> None:
    """Drop the clean cached pages of every file under `directory`, so that reads go to the device."""
    for path in directory.rglob("*"):
        if path.is_file():
            fd = os.open(path, os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)


def remount(mount: Path) -> None:
    image = mount.parent / "disk.img"  # as small_disk made it
    subprocess.run(["umount", str(mount)], check=True, capture_output=True)
    subprocess.run(["mount", "-o", "loop", str(image), str(mount)], check=True, capture_output=True)


def one_line_naming(error: StorageError, root: Path, operation: str) -> None:
    message = str(error)
    assert "\n" not in message and str(root / "segments") in message and operation in message, message
    assert "Input/output error" in message, message


def test_commit_and_read_under_eio_name_segment_and_operation_and_lose_nothing_that_returned(small_disk: Path) -> None:  # noqa: F811
    root = small_disk / ".agentfs"
    digests: dict[str, str] = {}
    store = agentfs.open(root)
    run = store.run("r")
    for step in range(COMMITS):
        data = os.urandom(ARTIFACT)
        digests[run.commit({"step": step}, artifacts={"a.bin": data}).id] = hashlib.sha256(data).hexdigest()
    first = next(iter(digests))
    device = loop_device(small_disk)

    drop_cached(root)
    limit_size(device, LIMIT)
    try:
        with pytest.raises(StorageError) as failed_commit:
            run.commit({"step": "under EIO"}, artifacts={"a.bin": os.urandom(ARTIFACT)})
        one_line_naming(failed_commit.value, root, "segment")
        with pytest.raises(StorageError) as failed_read:
            run.get(first).artifacts["a.bin"].read_bytes()
        one_line_naming(failed_read.value, root, "reading segment")
    finally:
        limit_size(device, 0)
    store.close()

    remount(small_disk)  # the device healthy again; ext4 replays (or had kept) its journal
    with agentfs.open(root) as reopened:
        kept = reopened.run("r")
        assert [checkpoint_id for checkpoint_id in digests if checkpoint_id in kept.ids()] == list(digests)
        for checkpoint_id, digest in digests.items():
            assert hashlib.sha256(kept.get(checkpoint_id).artifacts["a.bin"].read_bytes()).hexdigest() == digest
        following = kept.commit({"step": "after"})  # after the last that returned (or the one that failed, if it was written whole)
        assert following.parent == list(digests)[-1] or kept.get(str(following.parent)).state == {"step": "under EIO"}
    checked = cli("verify", store=root)
    assert checked.returncode == 0, checked.stdout + checked.stderr
