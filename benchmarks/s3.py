"""A local moto S3 server in its own process, and s3fs clients for it.

moto runs as ``ThreadedMotoServer`` on 127.0.0.1 and a free port, inside a
child process so that it does not share this process's GIL with the client
being measured (on 2 cores that matters). The child wraps moto's WSGI app to
count requests and request-body bytes and to note when each PUT was done; a
line on its stdin asks for those, and closing its stdin stops it.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from typing import Any

_CHILD = """
import json, logging, sys, threading, time
logging.getLogger("werkzeug").setLevel(logging.ERROR)
from moto.server import ThreadedMotoServer

server = ThreadedMotoServer(ip_address="127.0.0.1", port=int(sys.argv[1]), verbose=False)
server.start()
lock = threading.Lock()
stats = {"body_bytes": 0, "requests": {}}
puts = {}  # key -> wall-clock time its PUT was done (the key is visible from then on)
inner = server._server.app

def counting(environ, start_response):
    method = environ["REQUEST_METHOD"]
    query = environ.get("QUERY_STRING", "")
    path = environ.get("PATH_INFO", "").strip("/")
    if method == "GET" and ("list-type" in query or "/" not in path):
        method = "LIST"
    with lock:
        stats["body_bytes"] += int(environ.get("CONTENT_LENGTH") or 0)
        stats["requests"][method] = stats["requests"].get(method, 0) + 1
    result = inner(environ, start_response)
    if method == "PUT":
        done = time.time()
        with lock:
            puts.setdefault(path, done)
    return result

server._server.app = counting
print("ready", flush=True)
for line in sys.stdin:
    cmd, _, arg = line.strip().partition(" ")
    with lock:
        if cmd == "puts":
            print(json.dumps({k: t for k, t in puts.items() if arg in k}), flush=True)
        else:
            print(json.dumps(stats), flush=True)
server.stop()
"""

DUMMY_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass(frozen=True)
class ServerStats:
    """Request bodies received (bytes, as sent: aws-chunked framing included)
    and requests by method (GET on a bucket or with list-type counts as LIST)."""

    body_bytes: int
    requests: dict[str, int]

    def __sub__(self, other: ServerStats) -> ServerStats:
        methods = set(self.requests) | set(other.requests)
        diff = {m: self.requests.get(m, 0) - other.requests.get(m, 0) for m in methods}
        return ServerStats(self.body_bytes - other.body_bytes, {m: n for m, n in diff.items() if n})

    def count(self, *methods: str) -> int:
        return sum(self.requests.get(m, 0) for m in methods)


class MotoServer:
    """moto's S3 on 127.0.0.1; ``endpoint`` is its URL."""

    def __init__(self) -> None:
        os.environ.update(DUMMY_ENV)
        self.port = free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _CHILD, str(self.port)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env={**os.environ, **DUMMY_ENV},
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if b"ready" not in line:
            raise RuntimeError(f"moto server did not start (said {line!r})")
        self._wait_listening()
        self._buckets: set[str] = set()
        self._lock = threading.Lock()

    def _wait_listening(self, timeout: float = 20.0) -> None:
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("moto server is not listening")

    @property
    def storage_options(self) -> dict[str, Any]:
        return {
            "key": DUMMY_ENV["AWS_ACCESS_KEY_ID"],
            "secret": DUMMY_ENV["AWS_SECRET_ACCESS_KEY"],
            "client_kwargs": {"endpoint_url": self.endpoint},
        }

    def fs(self) -> Any:
        """A fresh s3fs filesystem for this server (no shared instance cache)."""
        import s3fs

        return s3fs.S3FileSystem(skip_instance_cache=True, **self.storage_options)

    def bucket(self, name: str) -> str:
        """Create bucket ``name`` (3 to 63 characters) once; returns ``s3://name``."""
        if name not in self._buckets:
            self.fs().mkdir(name)
            self._buckets.add(name)
        return f"s3://{name}"

    def _ask(self, line: str) -> Any:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        with self._lock:
            self.proc.stdin.write(line.encode() + b"\n")
            self.proc.stdin.flush()
            return json.loads(self.proc.stdout.readline())

    def stats(self) -> ServerStats:
        """What the server has received so far (all clients)."""
        raw = self._ask("stats")
        return ServerStats(raw["body_bytes"], raw["requests"])

    def put_times(self, substring: str) -> dict[str, float]:
        """``bucket/key`` -> wall-clock time (``time.time()``) its first PUT was
        done, for every key containing ``substring``: from then on a reader sees it."""
        times: dict[str, float] = self._ask(f"puts {substring}")
        return times

    def remote_size(self, url: str) -> int:
        """Total size of the objects under ``url``."""
        fs = self.fs()
        try:
            return int(sum(fs.du(url, total=False).values()))
        except FileNotFoundError:
            return 0

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
