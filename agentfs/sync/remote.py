"""A remote's plumbing: any fsspec URL, create-only puts, reads and listings. Everything read from it is untrusted.

What its keys hold (the config, packs, pack indexes, head keys) is pack_remote.py's: a PackRemote holds a Remote.
"""

from __future__ import annotations

import contextlib
import datetime
import hashlib
import os
import posixpath
import re
import secrets
import urllib.parse
from collections.abc import Callable, Iterator
from typing import Any

import fsspec

from ..errors import AgentFSError, RemoteError
from ..extras import needs_protocol
from ..format import keys
from ..redaction import Redactor, redact_url

FILE_LIKE = {"file", "local"}
OBJECT_STORES = {"s3", "gs"}
PAGE = 1000  # keys per listing request past the first


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


def canonical_url(url: str) -> str:
    """One spelling per remote: `/x`, `file:///x/` and `x` (relative to the working directory) are all `file:///x`."""
    parts = urllib.parse.urlsplit(url)
    if parts.scheme in ("", "file", "local") and not parts.netloc:
        return "file://" + os.path.abspath(parts.path if parts.scheme else url)
    return url.rstrip("/")


def remote_name(url: str) -> str:
    """A directory name for the remote's local sync state: readable, unique per URL."""
    clean = redact_url(canonical_url(url))
    slug = re.sub(r"[^A-Za-z0-9._-]+", "-", clean)[-48:].strip("-.")
    return f"{slug}-{hashlib.sha256(clean.encode()).hexdigest()[:10]}"


class Remote:
    def __init__(self, url: str, storage_options: dict[str, Any]) -> None:
        self.url = redact_url(canonical_url(url))
        self.name = remote_name(url)
        self.redactor = Redactor(url, storage_options)
        with self.failing("open"), needs_protocol(url, f"remote {self.url}"):  # gs:// without gcsfs: the pip line to run
            self.fs, root = fsspec.core.url_to_fs(canonical_url(url), **storage_options)
        self.root = root.rstrip("/")
        self.protocols = self.fs.protocol if isinstance(self.fs.protocol, tuple) else (self.fs.protocol,)
        self.file_like = bool(FILE_LIKE.intersection(self.protocols))
        self.object_store = bool(OBJECT_STORES.intersection(self.protocols))  # listed by their own requests (_pages)

    def __repr__(self) -> str:
        return f"<Remote {self.url}>"

    @contextlib.contextmanager
    def failing(self, operation: str, *expected: type[Exception]) -> Iterator[None]:
        """Turn any failure of `operation` into one RemoteError naming the URL, its secrets and those of the
        storage options redacted (tests/sync/test_redaction.py).

        s3fs lets botocore's own exceptions out (no credentials, an endpoint that refuses), which are
        not OSErrors; `expected` ones (FileNotFoundError: the key is not there) are the caller's to handle.
        """
        passing: tuple[type[Exception], ...] = (AgentFSError, *expected)
        try:
            yield
        except passing:
            raise
        except Exception as exc:
            raise RemoteError(self.redactor.text(f"remote {self.url}: {operation} failed: {type(exc).__name__}: {exc}")) from None

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

    def list_names(self, prefix: str) -> list[str]:
        """The names of the keys directly under `prefix`; none if it does not exist. On S3 and GCS one
        request per 1,000 keys (s3fs's and gcsfs's `ls` of an empty prefix ask again whether it exists);
        those requests list nested keys too (and drop them here), so call it on flat directories only
        (gc/, retired/<digest>/): under packs/ or heads/ it would page through every key below."""
        if self.object_store:
            with self.failing(f"list {prefix}"):
                return [name for page in self._pages(prefix, "", PAGE) for name in page if name and "/" not in name]
        self.fs.invalidate_cache(prefix)
        try:
            with self.failing(f"list {prefix}", FileNotFoundError):
                return [posixpath.basename(p.rstrip("/")) for p in self.fs.ls(prefix, detail=False)]
        except FileNotFoundError:
            return []

    def list_infos(self, prefix: str) -> list[dict[str, Any]] | None:
        """fsspec's info dict (name, size, modification time) of each key directly under `prefix`, listed afresh
        (no cached listing); None if `prefix` does not exist. One `ls` of the whole prefix (list_names lists names
        only: on a local remote the info dicts cost a stat per key)."""
        self.fs.invalidate_cache(prefix)
        try:
            with self.failing(f"list {prefix}", FileNotFoundError):
                return list(self.fs.ls(prefix, detail=True))
        except FileNotFoundError:
            return None

    def first_name(self, directory: str, after: str, decode: Callable[[str], str | None]) -> str | None:
        """decode(name) of the first name, in ascending order, directly under the key `directory` that
        sorts after `after` and that `decode` accepts (not None); None if there is none.

        On S3 and GCS one listing request that asks for one key, whatever the directory holds (more
        only past names `decode` refuses: a damaged or hostile remote); elsewhere one listing of all.
        """
        pages = self._pages(directory, after, 1) if self.object_store else iter([self.list_names(directory)])
        with self.failing(f"list {directory}"):
            for names in pages:
                found = {name: decoded for name in names if name > after and (decoded := decode(name)) is not None}
                if found:  # min: a server may ignore the page size (the GCS emulator lists every key)
                    return found[min(found)]
        return None

    def _pages(self, directory: str, after: str, first: int) -> Iterator[list[str]]:
        """The names under `directory` (nested ones with their "/") that sort after `after`, ascending, in
        a page of `first` keys, then pages of PAGE: S3's ListObjectsV2 or GCS's objects list, called directly."""
        bucket, prefix, _ = self.fs.split_path(directory + "/")
        return self._s3_pages(bucket, prefix, after, first) if "s3" in self.protocols else self._gcs_pages(bucket, prefix, after, first)

    def _s3_pages(self, bucket: str, prefix: str, after: str, first: int) -> Iterator[list[str]]:
        request: dict[str, Any] = {"Bucket": bucket, "Prefix": prefix, "StartAfter": prefix + after, "MaxKeys": first}
        while True:
            page = self.fs.call_s3("list_objects_v2", **request)
            yield [str(item["Key"])[len(prefix) :] for item in page.get("Contents", [])]
            if not page.get("IsTruncated"):
                return
            request = {**request, "ContinuationToken": page["NextContinuationToken"], "MaxKeys": PAGE}

    def _gcs_pages(self, bucket: str, prefix: str, after: str, first: int) -> Iterator[list[str]]:
        request: dict[str, Any] = {"prefix": prefix, "startOffset": prefix + after, "maxResults": first}  # startOffset is inclusive
        while True:
            page = self.fs.call("GET", "b/{}/o", bucket, json_out=True, **request)
            yield [str(item["name"])[len(prefix) :] for item in page.get("items", [])]
            if not page.get("nextPageToken"):
                return
            request = {**request, "pageToken": page["nextPageToken"], "maxResults": PAGE}

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
