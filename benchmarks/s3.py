"""A local moto S3 server in its own process, and s3fs clients for it.

moto runs as ``ThreadedMotoServer`` on 127.0.0.1 and a free port, inside a
child process so that it does not share this process's GIL with the client
being measured (on 2 cores that matters). Closing the child's stdin stops it.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from typing import Any

_CHILD = (
    "import sys\n"
    "from moto.server import ThreadedMotoServer\n"
    "s = ThreadedMotoServer(ip_address='127.0.0.1', port=int(sys.argv[1]), verbose=False)\n"
    "s.start()\n"
    "print('ready', flush=True)\n"
    "sys.stdin.read()\n"
    "s.stop()\n"
)

DUMMY_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


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
        """Create bucket ``name`` once; returns ``s3://name``."""
        if name not in self._buckets:
            self.fs().mkdir(name)
            self._buckets.add(name)
        return f"s3://{name}"

    def bytes_received(self) -> int:
        """Bytes the server process has read (sockets included): an upper bound
        of what clients uploaded, HTTP overhead included."""
        with open(f"/proc/{self.proc.pid}/io") as f:
            for line in f:
                if line.startswith("rchar:"):
                    return int(line.split()[1])
        return 0

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
