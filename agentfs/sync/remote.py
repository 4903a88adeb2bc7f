"""A remote's plumbing: any fsspec URL, create-only puts, reads and listings. Everything read from it is untrusted.

What its keys hold (packs, pack indexes, head keys) is pack_remote.py's.
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import os
import posixpath
import re
import secrets
import time
import urllib.parse
from collections.abc import Iterator
from typing import Any

import fsspec
from ulid import ULID

from ..engine.repository import Repository
from ..errors import AgentFSError, RemoteError
from ..format import keys
from ..format.config import check_remote_config, encode_config
from ..format.keys import CONFIG
from ..names import ID
from .index import PushIndex, remember_url

FILE_LIKE = {"file", "local"}



def modified(info: dict[str, Any]) -> float:
    """Last-modified time from an fsspec info dict: s3fs, gcsfs, local and memory name it differently."""
    for field in ("LastModified", "updated", "mtime", "created"):
        value = info.get(field)
        if value is None:
            continue
        if isinstance(value, (int, float)):
            return float(value)
        if isinstance(value, str):
            return datetime.datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
        if isinstance(value, datetime.datetime):
            return (value if value.tzinfo else value.replace(tzinfo=datetime.timezone.utc)).timestamp()
    raise RemoteError(f"remote object {info.get('name')!r} has no modification time")


def redact(url: str) -> str:
    """The URL without any user:password@ part, for messages and the store's remotes/ directory."""
    parts = urllib.parse.urlsplit(url)
    if parts.username or parts.password:
        netloc = parts.hostname or ""
        if parts.port:
            netloc += f":{parts.port}"
        return urllib.parse.urlunsplit(parts._replace(netloc=netloc))
    return url


def canonical_url(url: str) -> str:
    """One spelling per remote: `/x`, `file:///x/` and `x` (relative to the working directory) are all `file:///x`."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme in ("", "file", "local") and not parts.netloc:
        return "file://" + os.path.abspath(parts.path if parts.scheme else url)
    return url.rstrip("/")


def remote_name(url: str) -> str:
    """A directory name for the remote's local sync state: readable, unique per URL."""
    clean = redact(canonical_url(url))
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", clean)[-48:].strip("-.")
    return f"{slug}-{hashlib.sha256(clean.encode()).hexdigest()[:10]}"


class Remote:
    def __init__(self, url: str, storage_options: dict[str, Any]) -> None:
        self.url = redact(canonical_url(url))
        self.name = remote_name(url)
        with self.failing("open"):
            self.fs, root = fsspec.core.url_to_fs(canonical_url(url), **storage_options)
        self.root = root.rstrip("/")
        self.protocols = self.fs.protocol if isinstance(self.fs.protocol, tuple) else (self.fs.protocol,)
        self.file_like = bool(FILE_LIKE.intersection(self.protocols))
        self.index: PushIndex | None = None
        self.config: dict[str, Any] | None = None  # set once identify() has read and checked it

    def __repr__(self) -> str:
        return f"<Remote {self.url}>"

    @contextlib.contextmanager
    def failing(self, operation: str, *expected: type[Exception]) -> Iterator[None]:
        """Turn any failure of `operation` into one RemoteError naming the URL (its credentials redacted).

        s3fs lets botocore's own exceptions out (no credentials, an endpoint that refuses), which are
        not OSErrors; `expected` ones (FileNotFoundError: the key is not there) are the caller's to handle.
        """
        passing: tuple[type[Exception], ...] = (AgentFSError, *expected)
        try:
            yield
        except passing:
            raise
        except Exception as exc:
            raise RemoteError(f"remote {self.url}: {operation} failed: {type(exc).__name__}: {exc}") from None

    def identify(self) -> dict[str, Any]:
        """The remote's config, checked: a URL with none (a typo, a missing bucket) is refused, never read as empty."""
        if self.config is None:
            data = self.read(self.key(CONFIG), 1 << 20)
            if data is None:
                raise RemoteError(f"remote {self.url} holds no agentfs store (no config): check the bucket and path (a push creates one)")
            self.config = check_remote_config(data, f"remote {self.url} config")
        return self.config

    def ensure_config(self, config: dict[str, Any]) -> None:
        """For a pusher: create the remote's config on the first push, else check that this agentfs can write its format."""
        if self.read(self.key(CONFIG), 1 << 20) is None:
            self.create(self.key(CONFIG), encode_config(config), compare=False)
        self.identify()

    # keys

    def key(self, *parts: str) -> str:
        return posixpath.join(self.root, *parts)

    # reading (untrusted: callers verify every byte)

    def read(self, key: str, limit: int) -> bytes | None:
        try:
            with self.failing(f"read {key}", FileNotFoundError):
                data = bytes(self.fs.cat_file(key, start=0, end=limit + 1))
        except FileNotFoundError:
            return None
        if len(data) > limit:
            raise RemoteError(f"remote key {key} is over the {limit}-byte limit; refused")
        return data

    def attach(self, store: Repository) -> None:
        """Record what is fetched from here in the store's index for this remote; check the remote's format."""
        if self.index is not None:
            return
        self.identify()
        self.index = PushIndex(store.remote_state_dir(self.name))
        remember_url(self.index.directory, self.url)
        (self.index.directory / "pulled").touch()

    def list_names(self, prefix: str) -> list[str]:
        """The names directly under `prefix`; none if it does not exist."""
        self.fs.invalidate_cache(prefix)
        try:
            with self.failing(f"list {prefix}", FileNotFoundError):
                return [posixpath.basename(p.rstrip("/")) for p in self.fs.ls(prefix, detail=False)]
        except FileNotFoundError:
            return []

    def greatest_id(self, directory: str) -> str | None:
        """The greatest id named directly under the key `directory`. On S3, found by one-key listings
        that bisect time (ids begin with their millisecond): about 25 small requests with 10 or
        10,000 ids; elsewhere one listing."""
        if "s3" in self.protocols:
            with contextlib.suppress(Exception):  # any surprise from a lookalike endpoint: list it all
                return self._s3_greatest(directory)
        ids = [name for name in self.list_names(directory) if ID.fullmatch(name)]
        return max(ids, default=None)

    def _s3_greatest(self, directory: str) -> str | None:
        bucket, prefix, _ = self.fs.split_path(directory + "/")
        now_ms = time.time_ns() // 1_000_000
        if self._s3_any_from(bucket, prefix, now_ms + 1):  # written by a clock ahead of ours: few, list them
            return max(self._s3_ids_from(bucket, prefix, now_ms + 1))
        # no id is from after `high`; step back (100 ms, then 8x further each time) until one is from `low` on
        high, back_ms = now_ms, 100
        while True:
            low = max(0, now_ms - back_ms)
            if self._s3_any_from(bucket, prefix, low):
                break
            if low == 0:
                return None
            high, back_ms = low - 1, back_ms * 8
        while low < high:  # bisect for the last millisecond that has an id
            middle = (low + high + 1) // 2
            if self._s3_any_from(bucket, prefix, middle):
                low = middle
            else:
                high = middle - 1
        return max(self._s3_ids_from(bucket, prefix, low))

    @staticmethod
    def _after(prefix: str, ms: int) -> str:
        """The StartAfter key that lists every id from millisecond `ms` on."""
        return prefix + str(ULID(ms.to_bytes(6, "big") + bytes(10)))[:10] + "0" * 16

    def _s3_any_from(self, bucket: str, prefix: str, ms: int) -> bool:
        page = self.fs.call_s3("list_objects_v2", Bucket=bucket, Prefix=prefix, StartAfter=self._after(prefix, ms), MaxKeys=1)
        return bool(page.get("Contents"))

    def _s3_ids_from(self, bucket: str, prefix: str, ms: int) -> list[str]:
        ids: list[str] = []
        token: dict[str, str] = {}
        while True:
            page = self.fs.call_s3("list_objects_v2", Bucket=bucket, Prefix=prefix, StartAfter=self._after(prefix, ms), **token)
            ids.extend(name for item in page.get("Contents", []) if ID.fullmatch(name := item["Key"][len(prefix) :]))
            if not page.get("IsTruncated"):
                return ids
            token = {"ContinuationToken": page["NextContinuationToken"]}

    def delete(self, key: str) -> None:
        try:
            with self.failing(f"delete {key}", FileNotFoundError):
                self.fs.rm_file(key)
        except FileNotFoundError:
            return

    # writing: nothing on the remote is ever overwritten

    def create(self, key: str, data: bytes, *, compare: bool = True) -> bool:
        """Create `key` holding `data`; False if it already held exactly `data`.

        A key that exists with other bytes is never taken for ours: RemoteError (with `compare=False`,
        for a key whose content the caller checks itself, it is just False). Object stores get a
        conditional PUT (If-None-Match: *), atomic and refused if the key exists. File-like remotes
        get the bytes under a temporary key first, so a crash mid-upload never leaves a
        complete-looking key.
        """
        with self.failing(f"create {key}"):
            created = self._create_by_rename(key, data) if self.file_like else self._create_conditionally(key, data)
        if created or not compare:
            return created
        with self.failing(f"read {key}"):
            held = bytes(self.fs.cat_file(key, start=0, end=len(data) + 1))
        if held != data:
            raise RemoteError(f"remote {self.url}: {key} already exists with other bytes; not marked pushed")
        return False

    def _create_conditionally(self, key: str, data: bytes) -> bool:
        try:
            self.fs.pipe_file(key, data, mode="create")
        except FileExistsError:
            return False
        return True

    def _create_by_rename(self, key: str, data: bytes) -> bool:
        if self.fs.exists(key):
            return False
        temp = self.key(keys.TMP, f"{secrets.token_hex(12)}.partial")
        self.fs.makedirs(posixpath.dirname(temp), exist_ok=True)
        self.fs.pipe_file(temp, data)
        self.fs.makedirs(posixpath.dirname(key), exist_ok=True)
        try:
            self.fs.link(temp, key)  # a hard link, unlike a rename, never replaces a key created meanwhile
        except FileExistsError:
            return False
        finally:
            self.fs.rm_file(temp)
        return True
