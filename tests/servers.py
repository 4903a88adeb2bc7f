"""Real S3 (moto) and GCS (gcp-storage-emulator) servers for tests, on 127.0.0.1 only.

Registered for every test module by ``pytest_plugins`` in tests/conftest.py. PYTEST_DONT_REWRITE
(no asserts here; the marker stops pytest warning when a module imports helpers from this module
before pytest_plugins registers it).

Fixtures
--------
``moto_server`` (session)  -> :class:`MotoServer` with ``endpoint_url``, ``stop()``, ``start()``.
``gcs_server`` (session)   -> :class:`GcsServer` with ``endpoint_url``.
``remote`` (function)      -> :class:`RemoteSpec`, parametrized over file, memory, s3, gcs;
                              each a fresh, empty, unique location.
Servers start lazily: a test that only uses file/memory never starts moto or the emulator.

Helpers ``make_file_spec(tmp_path)``, ``make_memory_spec()``, ``make_s3_spec(moto_server)``
and ``make_gcs_spec(gcs_server)`` build specs without parametrization. Open one with
``fsspec.core.url_to_fs(spec.url, **spec.storage_options)`` (or ``spec.connect()``).

Listing caches (the "second machine" hazard)
--------------------------------------------
s3fs and gcsfs keep a per-instance directory-listing cache (fsspec ``DirCache``) that
never expires by default, and ``exists``/``info``/``ls`` answer from it. Measured with two
instances, A having listed a prefix before B wrote to it: on s3fs A's ``ls`` misses B's new
key, ``exists(new)`` is False, ``info(new)`` raises FileNotFoundError, and after B deletes a
key A's ``exists`` still says True; gcsfs behaves the same for ``ls`` and deletions.
``use_listings_cache=False`` fixes all of these (the cache then stores nothing), so the
s3 and gcs specs carry it. ``fs.invalidate_cache()`` is the per-call alternative.

Instances are also cached: ``url_to_fs`` with equal storage_options returns the *same*
object (listing cache included). Harmless once listings are not cached; pass
``skip_instance_cache=True`` when a test needs genuinely separate clients ("two machines",
different timeouts). memory:// is one process-global store whatever the instance.

Other facts
-----------
* file:// needs ``auto_mkdir=True`` or ``pipe_file`` into a missing directory fails
  (object stores have no directories); the file spec carries it.
* ``pipe_file(path, data, mode="create")``: s3fs sends ``If-None-Match: *``; moto refuses an
  existing key with ``FileExistsError`` (translated from 412 PreconditionFailed). The GCS
  emulator ignores it and silently overwrites. file:// and memory:// implement it as
  exists-then-write (FileExistsError, but not atomic).
* Outages on s3fs: a refused connection raises ``botocore.exceptions.EndpointConnectionError``,
  which is NOT an ``OSError``. With default options botocore's legacy retry mode retries it
  (5 attempts with backoff): 6-12 s per call. ``S3_FAST_FAIL_CONFIG_KWARGS`` (``make_s3_spec(...,
  fast_fail=True)``) makes it fail in a few ms. Note ``retries: {"max_attempts": 1}`` is NOT
  enough: in legacy mode that means one *retry* (~1 s); use ``total_max_attempts: 1``.
* A hung endpoint (accepts, never answers) raises ``botocore.exceptions.ReadTimeoutError``
  (an OSError). s3fs itself retries that 5 times on top of botocore (7 s with read_timeout=1).
  s3fs's own retry count is the class attribute ``S3FileSystem.retries``; it is NOT a
  constructor option (passing ``retries=`` reaches aiobotocore's session and raises TypeError
  on first use). Set ``fs.retries = 1`` on the instance to get ~read_timeout.
* The GCS emulator is a single-threaded ``http.server`` with a listen backlog of 5. Up to
  ~6 requests in flight are fine; 8 costs ~1 s (dropped SYNs are retransmitted after 1 s);
  gcsfs's default batch of ``pipe``/``cat`` over many paths (128 in flight) gets connection
  resets and gcsfs retries with backoff: 128 small ``pipe``s took ~2 minutes. The gcs spec
  sets ``batch_size=GCS_EMULATOR_MAX_CONCURRENCY`` (an fsspec AsyncFileSystem option).
  Sync calls from 8 threads at once work (~1 s for 50 small writes).
* gcsfs 2026.x probes buckets over gRPC for 60 s unless ``GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT``
  is false *when gcsfs is imported*; this module sets it on import, so import it (or load it
  as a plugin) before anything imports gcsfs.
* moto: region only via ``AWS_DEFAULT_REGION`` (``region_name`` in client_kwargs breaks bucket
  creation); bucket names need >= 3 characters. moto keeps its data across stop/start in the
  same process; a stopped server's port refuses connections.
"""

from __future__ import annotations

import os

# Hazard: must be set before gcsfs is first imported anywhere in the process.
os.environ["GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT"] = "false"

import copy
import socket
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import fsspec
import pytest
from fsspec.spec import AbstractFileSystem

HOST = "127.0.0.1"
AWS_KEY = "testing"
AWS_SECRET = "testing"
AWS_REGION = "us-east-1"
GCS_EMULATOR_MAX_CONCURRENCY = 5
REMOTE_KINDS = ("file", "memory", "s3", "gcs")

S3_FAST_FAIL_CONFIG_KWARGS: dict[str, Any] = {
    "retries": {"total_max_attempts": 1},
    "connect_timeout": 1,
    "read_timeout": 5,
}


@dataclass(frozen=True)
class RemoteSpec:
    kind: str
    url: str
    storage_options: dict[str, Any] = field(default_factory=dict)

    def connect(self, **overrides: Any) -> tuple[AbstractFileSystem, str]:
        """``fsspec.core.url_to_fs(url, **storage_options, **overrides)`` -> (fs, root path)."""
        fs, root = fsspec.core.url_to_fs(self.url, **{**self.storage_options, **overrides})
        return fs, root


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def _unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


class MotoServer:
    """moto's ThreadedMotoServer that can be stopped and restarted on the same port."""

    def __init__(self) -> None:
        from moto.server import ThreadedMotoServer

        self._server = ThreadedMotoServer(ip_address=HOST, port=0, verbose=False)
        self._server.start()
        self.host, self.port = self._server.get_host_and_port()
        self.endpoint_url = f"http://{self.host}:{self.port}"
        self.running = True

    def stop(self) -> None:
        if self.running:
            self._server.stop()
            self.running = False

    def start(self) -> None:
        """Restart on the same port; moto's backends are process-global, so data survives."""
        from moto.server import ThreadedMotoServer

        if not self.running:
            self._server = ThreadedMotoServer(ip_address=HOST, port=self.port, verbose=False)
            self._server.start()
            self.running = True


class GcsServer:
    """gcp-storage-emulator, in memory, serving from a thread of this process."""

    def __init__(self) -> None:
        from gcp_storage_emulator.server import Server, create_server

        last_error = "not started"
        for _ in range(3):
            port = free_port()
            server: Server = create_server(HOST, port, in_memory=True)
            # Hazard: the emulator's serving thread is non-daemon (a missed stop() would hang
            # interpreter exit) and start() waits forever if the bind fails (port race).
            server._api.daemon = True
            starter = threading.Thread(target=server.start, daemon=True)
            starter.start()
            starter.join(timeout=10)
            if not starter.is_alive() and server._api.is_alive():
                self._server = server
                self.host, self.port = HOST, port
                self.endpoint_url = f"http://{HOST}:{port}"
                return
            last_error = f"emulator did not start on port {port}"
        raise RuntimeError(last_error)

    def stop(self) -> None:
        self._server.stop()


def _check_gcsfs_not_experimental() -> None:
    cls = fsspec.get_filesystem_class("gs")
    if cls.__name__ != "GCSFileSystem":
        raise RuntimeError(
            f"gcsfs resolved to {cls.__module__}.{cls.__name__}: gcsfs was imported before "
            "tests.servers set GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT=false (60 s gRPC probes per bucket)"
        )


@pytest.fixture(scope="session")
def moto_server() -> Iterator[MotoServer]:
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("AWS_ACCESS_KEY_ID", AWS_KEY)
        mp.setenv("AWS_SECRET_ACCESS_KEY", AWS_SECRET)
        mp.setenv("AWS_DEFAULT_REGION", AWS_REGION)
        mp.delenv("AWS_PROFILE", raising=False)
        mp.delenv("AWS_SESSION_TOKEN", raising=False)
        server = MotoServer()
        try:
            yield server
        finally:
            server.stop()


@pytest.fixture(scope="session")
def gcs_server() -> Iterator[GcsServer]:
    _check_gcsfs_not_experimental()
    with pytest.MonkeyPatch.context() as mp:
        server = GcsServer()
        mp.setenv("STORAGE_EMULATOR_HOST", server.endpoint_url)
        try:
            yield server
        finally:
            server.stop()


def make_file_spec(tmp_path: Path) -> RemoteSpec:
    root = tmp_path / _unique("remote")
    root.mkdir(parents=True)
    return RemoteSpec("file", root.as_uri(), {"auto_mkdir": True})


def make_memory_spec() -> RemoteSpec:
    return RemoteSpec("memory", f"memory://{_unique('agentfs-test')}/prefix", {})


def s3_storage_options(endpoint: MotoServer | str, *, fast_fail: bool = False) -> dict[str, Any]:
    endpoint_url = endpoint if isinstance(endpoint, str) else endpoint.endpoint_url
    options: dict[str, Any] = {
        "client_kwargs": {"endpoint_url": endpoint_url},
        "key": AWS_KEY,
        "secret": AWS_SECRET,
        "use_listings_cache": False,
    }
    if fast_fail:
        options["config_kwargs"] = copy.deepcopy(S3_FAST_FAIL_CONFIG_KWARGS)
    return options


def make_s3_spec(moto_server: MotoServer, *, fast_fail: bool = False) -> RemoteSpec:
    bucket = _unique("bucket")
    options = s3_storage_options(moto_server, fast_fail=fast_fail)
    fs, _ = fsspec.core.url_to_fs(f"s3://{bucket}", **options)
    fs.mkdir(bucket)
    return RemoteSpec("s3", f"s3://{bucket}/prefix", options)


def gcs_storage_options(gcs_server: GcsServer) -> dict[str, Any]:
    return {
        "token": "anon",
        "endpoint_url": gcs_server.endpoint_url,
        "use_listings_cache": False,
        "batch_size": GCS_EMULATOR_MAX_CONCURRENCY,
    }


def make_gcs_spec(gcs_server: GcsServer) -> RemoteSpec:
    bucket = _unique("bucket")
    options = gcs_storage_options(gcs_server)
    fs, _ = fsspec.core.url_to_fs(f"gs://{bucket}", **options)
    fs.mkdir(bucket)
    return RemoteSpec("gcs", f"gs://{bucket}/prefix", options)


@pytest.fixture(params=REMOTE_KINDS)
def remote(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[RemoteSpec]:
    kind: str = request.param
    if kind == "file":
        spec = make_file_spec(tmp_path)
    elif kind == "memory":
        spec = make_memory_spec()
    elif kind == "s3":
        spec = make_s3_spec(request.getfixturevalue("moto_server"))
    elif kind == "gcs":
        spec = make_gcs_spec(request.getfixturevalue("gcs_server"))
    else:
        raise ValueError(kind)
    yield spec
    if kind == "memory":
        fs, root = spec.connect()
        top = "/" + root.strip("/").split("/")[0]
        if fs.exists(top):
            fs.rm(top, recursive=True)
