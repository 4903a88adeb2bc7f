"""A full disk, for commits and gc: a small ext4 image, loop-mounted, filled by commits and
gc until ENOSPC. Every error names its path and operation; a failed gc leaves the store as it was (its partial
output removed, its space returned); once space is freed every commit that returned reads back after a reopen,
verify is clean and commits go on. Needs root and loop devices: skipped (with why) only where they are missing,
never when CI is set."""

from __future__ import annotations

import errno
import hashlib
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

import agentfs
from agentfs.errors import StorageError
from agentfs.format import segment as fmt

# one xdist worker takes every loop-mounting test (make test: --dist loadgroup), so no two attach loop devices at once
pytestmark = [pytest.mark.timeout(300), pytest.mark.xdist_group("loop-devices")]
IMAGE_MIB = 40
ARTIFACT = 256 << 10  # incompressible bytes per commit
SMALL_COMMITS, SMALL_ARTIFACT = 1500, 5000  # 3,000 live records of about 5 KB: three compaction batches of 1,024
GAP = 6 << 20  # free bytes left for the gc: more than one batch of its output, less than all of it


def _unavailable(why: str) -> None:
    if os.environ.get("CI"):
        pytest.fail(f"the disk-full test cannot run in CI: {why}")
    pytest.skip(f"needs a loop-mounted ext4 image: {why}")


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A fresh ext4 file system of IMAGE_MIB MiB (no reserved blocks: root fills it too), mounted for the test."""
    if os.geteuid() != 0:
        _unavailable("mounting needs root")
    if shutil.which("mkfs.ext4") is None:
        _unavailable("mkfs.ext4 is not installed (Debian package e2fsprogs)")
    image, mount = tmp_path / "disk.img", tmp_path / "mnt"
    mount.mkdir()
    with image.open("wb") as file:
        file.truncate(IMAGE_MIB << 20)
    subprocess.run(["mkfs.ext4", "-q", "-F", "-m", "0", str(image)], check=True, capture_output=True)
    mounted = subprocess.run(["mount", "-o", "loop", str(image), str(mount)], capture_output=True, text=True, check=False)
    if mounted.returncode != 0:
        _unavailable(f"mount -o loop failed: {mounted.stderr.strip()}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], check=False, capture_output=True)


def free_bytes(path: Path) -> int:
    stat = os.statvfs(path)
    return stat.f_bavail * stat.f_frsize


def fill(path: Path) -> None:
    """Write zeros to `path` until the file system is full."""
    with path.open("ab") as file:
        try:
            while True:
                file.write(bytes(64 << 10))
                file.flush()
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
    while True:  # a last partial block may still fit
        try:
            with path.open("ab") as file:
                file.write(b"\0" * 1024)
        except OSError:
            return


def store_descriptors(root: Path) -> list[str]:
    paths = (os.readlink(f"/proc/self/fd/{fd}") for fd in os.listdir("/proc/self/fd") if os.path.exists(f"/proc/self/fd/{fd}"))
    return [path for path in paths if path.startswith(str(root))]


def assert_names_path_and_operation(error: BaseException, root: Path) -> None:
    assert isinstance(error, StorageError), repr(error)
    assert error.errno == errno.ENOSPC and str(root) in str(error), str(error)
    assert str(error).split(" /")[0], str(error)  # the operation, in words, before the path


def test_commits_and_gc_until_the_disk_is_full_then_every_returned_commit_survives(small_disk: Path) -> None:
    root = small_disk / ".agentfs"
    ballast = small_disk / "ballast"
    ballast.write_bytes(bytes(4 << 20))  # freed at the end: "then free space"
    committed: dict[str, str] = {}  # checkpoint id -> sha256 of its artifact
    failures: dict[str, BaseException] = {}
    store = agentfs.open(root)
    keep, scratch = store.run("keep"), store.run("scratch")
    for number in range(400):
        artifact = os.urandom(ARTIFACT)
        try:
            checkpoint = keep.commit({"n": number}, artifacts={"a.bin": artifact})
            committed[checkpoint.id] = hashlib.sha256(artifact).hexdigest()
            scratch.commit({"n": number}, artifacts={"a.bin": os.urandom(ARTIFACT)})
            if number % 5 == 4:
                scratch.prune(keep_last=1)
                store.gc(grace=0)
        except agentfs.AgentFSError as exc:
            operation = "gc" if "compact" in str(exc) or number % 5 == 4 else "commit"
            failures.setdefault(operation, exc)
            assert_names_path_and_operation(exc, root)
            if len(failures) == 2 or number > 300:
                break
    assert "commit" in failures, "the disk never filled"
    store.close()
    assert store_descriptors(root) == [], "close() after ENOSPC left descriptors open"

    ballast.unlink()
    with agentfs.open(root) as reopened:
        run = reopened.run("keep")
        for checkpoint_id, digest in committed.items():
            assert hashlib.sha256(run.get(checkpoint_id).artifacts["a.bin"].read_bytes()).hexdigest() == digest
        report = reopened.verify()
        assert report.ok, str(report)
        after = run.commit({"n": "after"}, artifacts={"a.bin": b"fits now"})
        assert run.get(after.id).artifacts["a.bin"].read_bytes() == b"fits now"
        try:  # compaction copies live records before it deletes: the space freed may not be enough
            assert not reopened.gc(grace=0).damaged
        except StorageError as exc:
            assert_names_path_and_operation(exc, root)
        assert reopened.verify().ok
        assert run.commit({"n": "last"}).parent == after.id
    assert not [name for name in os.listdir(root / "segments") if not (name.endswith(fmt.SUFFIX) or name.endswith(fmt.SEAL_COPY_SUFFIX))]


def test_a_gc_that_hits_enospc_leaves_the_store_as_it_was_and_gives_its_space_back(small_disk: Path) -> None:
    root = small_disk / ".agentfs"
    with agentfs.open(root, durability="process") as store:  # fast set-up: what is tested is the gc
        keep, scratch = store.run("keep"), store.run("scratch")
        for number in range(SMALL_COMMITS):  # more live records than one compaction batch holds: several batches
            keep.commit({"n": number}, artifacts={"a.bin": os.urandom(SMALL_ARTIFACT)})
            scratch.commit({"n": number}, artifacts={"a.bin": os.urandom(SMALL_ARTIFACT)})
        scratch.prune(keep_last=1)
        ids = keep.ids()
    filler, gap = small_disk / "filler", small_disk / "gap"
    gap.write_bytes(os.urandom(GAP))
    fill(filler)
    gap.unlink()  # room for the compaction's first batches, not for all of its output
    segments_before = sorted(os.listdir(root / "segments"))
    free_before = free_bytes(small_disk)

    with agentfs.open(root) as store, pytest.raises(agentfs.AgentFSError) as failed:
        store.gc(grace=0)
    assert_names_path_and_operation(failed.value, root)
    assert "gc" in str(failed.value)
    assert sorted(os.listdir(root / "segments")) == segments_before, "the failed gc left its partial output"
    assert free_bytes(small_disk) >= free_before, "the failed gc kept space"
    assert store_descriptors(root) == []

    filler.unlink()
    with agentfs.open(root) as store:
        assert store.run("keep").ids() == ids
        assert store.verify().ok
        store.run("keep").commit({"n": "after"})
        assert store.gc(grace=0).bytes_freed > 0
        assert store.verify().ok
