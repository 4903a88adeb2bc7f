"""Credentials reach the remote, and nothing else: not the store, not a status file, not a log line."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

import agentfs
from agentfs.redaction import redact_url
from agentfs.sync.pack_remote import PackRemote
from agentfs.sync.push import Pusher
from agentfs.sync.remote import remote_name
from tests.servers import MotoServer, make_s3_spec

KEY = "AKIAEXAMPLEKEYID7777"
SECRET = "s3cr3t-Value-that-must-never-be-written"


def every_byte_under(root: Path) -> bytes:
    return b"".join(path.read_bytes() for path in sorted(root.rglob("*")) if path.is_file())


def test_credentials_are_never_written_or_logged(tmp_path: Path, moto_server: MotoServer, caplog: pytest.LogCaptureFixture) -> None:
    spec = make_s3_spec(moto_server, fast_fail=True)
    options: dict[str, Any] = {**spec.storage_options, "key": KEY, "secret": SECRET}
    caplog.set_level(logging.DEBUG, logger="agentfs")
    with agentfs.open(tmp_path / "store") as store:
        store.run("r").commit({"x": 1}, artifacts={"a.bin": b"z" * 100_000})
        assert Pusher(store.engine, PackRemote(spec.url, options)).push().entries == 1
        missing_bucket = spec.url.replace("s3://", "s3://no-such-bucket-", 1)
        with store.sync(missing_bucket, storage_options=options, interval=0.1, max_backoff=0.2) as daemon:
            store.run("r").commit({"x": 2})
            assert not daemon.flush(timeout=1.5)
            assert daemon.status()["last_error"]  # the failure is reported...
    written = every_byte_under(tmp_path / "store")
    for secret in (KEY, SECRET):
        assert secret.encode() not in written  # ...but never with the credentials
        assert secret not in caplog.text
        assert all(secret not in str(path) for path in (tmp_path / "store").rglob("*"))


def test_urls_lose_their_passwords_before_they_are_stored() -> None:
    url = "s3://user:hunter2@example-bucket/agents"
    assert "hunter2" not in redact_url(url)
    assert "hunter2" not in remote_name(url)
    assert redact_url("s3://bucket/agents") == "s3://bucket/agents"
