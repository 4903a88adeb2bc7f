"""A hostile remote: a test writes any key with any bytes, and reads, lists and deletes raw keys, bypassing agentfs.

What a careless or malicious party with write access to the bucket can do. `HostileRemote` wraps the
fsspec filesystem of a `RemoteSpec` (file:// or s3:// against moto's ThreadedMotoServer) and speaks
only in keys relative to the remote's root ("packs/<id>.pack", "heads/<digest>/<name>", "config"):
nothing here checks what the bytes mean. Record-level helpers (forge a record inside a well-framed
pack, delete a pack, truncate a key) build on tests/helpers/remote_raw.py.

The fixture is registered for every test module by ``pytest_plugins`` in tests/conftest.py:

``hostile_remote`` (function) -> :class:`HostileRemote`, parametrized over "file" and "s3", each a
fresh, empty location. ``HostileRemote.url`` and ``.storage_options`` open it with agentfs.
PYTEST_DONT_REWRITE (a test module may import it before pytest_plugins registers it).
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from fsspec.spec import AbstractFileSystem

from agentfs.format import keys
from tests.helpers import remote_raw
from tests.servers import RemoteSpec, make_file_spec, make_s3_spec

HOSTILE_KINDS = ("file", "s3")


@dataclass
class HostileRemote:
    spec: RemoteSpec
    fs: AbstractFileSystem
    root: str  # the remote's root path as the filesystem names it ("/tmp/.../remote-x" or "bucket-x/prefix")

    @classmethod
    def of(cls, spec: RemoteSpec) -> HostileRemote:
        fs, root = spec.connect(skip_instance_cache=True)
        return cls(spec, fs, root.rstrip("/"))

    @property
    def kind(self) -> str:
        return self.spec.kind

    @property
    def url(self) -> str:
        return self.spec.url

    @property
    def storage_options(self) -> dict[str, Any]:
        return dict(self.spec.storage_options)

    def path(self, key: str) -> str:
        """The filesystem path of a key relative to the root ("packs/x.pack")."""
        return posixpath.join(self.root, key)

    # raw keys

    def put(self, key: str, data: bytes) -> None:
        """Write `data` at `key`, replacing whatever is there."""
        path = self.path(key)
        self.fs.invalidate_cache()
        if self.fs.exists(path):
            self.fs.rm_file(path)
        self.fs.pipe_file(path, data)

    def get(self, key: str) -> bytes:
        self.fs.invalidate_cache()
        return bytes(self.fs.cat_file(self.path(key)))

    def exists(self, key: str) -> bool:
        self.fs.invalidate_cache()
        return bool(self.fs.exists(self.path(key)))

    def delete(self, key: str) -> None:
        self.fs.invalidate_cache()
        self.fs.rm_file(self.path(key))

    def list_keys(self, prefix: str = "") -> list[str]:
        """Every key under `prefix` (relative to the root), recursively, sorted."""
        self.fs.invalidate_cache()
        start = self.path(prefix) if prefix else self.root
        try:
            found = self.fs.find(start)
        except FileNotFoundError:
            return []
        base = self.root.strip("/") + "/"
        return sorted(str(path).strip("/")[len(base) :] for path in found if str(path).strip("/").startswith(base))

    def truncate(self, key: str, length: int) -> None:
        """Keep only the first `length` bytes of `key`."""
        self.put(key, self.get(key)[:length])

    # records and packs (format 2's remote layout)

    def pack_ids(self) -> list[str]:
        return remote_raw.pack_ids(self.fs, self.root)

    def pack_key(self, pack_id: str) -> str:
        return posixpath.join(*keys.pack_key(pack_id))

    def pack_index_key(self, pack_id: str) -> str:
        return posixpath.join(*keys.pack_index_key(pack_id))

    def frames(self) -> dict[tuple[int, bytes], remote_raw.Frame]:
        return remote_raw.frames(self.fs, self.root)

    def pack_of(self, kind: int, key: bytes) -> str:
        """The id of the pack holding a record."""
        return remote_raw.pack_id_of(self.frames()[(kind, key)])

    def put_record(self, kind: int, key: bytes, body: bytes) -> None:
        """Make the remote hold `body` as the record `(kind, key)`, in a well-framed pack (remote_raw.put_record)."""
        remote_raw.put_record(self.fs, self.root, kind, key, body)

    def delete_pack_bytes(self, pack_id: str) -> None:
        """Delete a pack but keep its index (and every head key naming it)."""
        self.delete(self.pack_key(pack_id))

    def head_keys(self, run: str) -> list[str]:
        return self.list_keys(posixpath.join(*keys.head_dir_key(run)))


@pytest.fixture(params=HOSTILE_KINDS)
def hostile_remote(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[HostileRemote]:
    kind: str = request.param
    spec = make_file_spec(tmp_path) if kind == "file" else make_s3_spec(request.getfixturevalue("moto_server"))
    yield HostileRemote.of(spec)
