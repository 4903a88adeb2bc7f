"""Secrets never shown: a planted endpoint query token and bucket credential, looked for on every surface.

Surfaces: the CLI's stdout and stderr (sync once, sync --watch's log, pull, status --json), every byte
the store holds (the remote's status file included), the API's exceptions, the daemon's status and
every log record. Real S3 (moto), the `agentfs` CLI as a subprocess.
"""

from __future__ import annotations

import json
import logging
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

import agentfs
from agentfs.redaction import Redactor, redact_url, scrub
from agentfs.sync.pack_remote import PackRemote
from agentfs.sync.pull import pull
from tests.cli.test_cli import COMMAND, ENV, cli
from tests.servers import MotoServer, free_port, make_s3_spec, s3_storage_options

TOKEN = "tok-PLANTED-endpoint-7e1d9a"  # in the endpoint URL's query string
BUCKET_KEY, BUCKET_SECRET = "AKIAPLANTEDBUCKETKEY", "planted-bucket-secret-41f"  # in the bucket part of the URL
OPTION_SECRET = "planted-storage-option-secret-55c"  # a storage option value (s3fs `secret`)
SECRETS = (TOKEN, BUCKET_KEY, BUCKET_SECRET, OPTION_SECRET)


def _absent(text: str, where: str) -> None:
    for secret in SECRETS:
        assert secret not in text, f"{secret} shown in {where}: {text[:2000]}"


def _store_bytes(root: Path) -> str:
    return "\n".join(f"{path}\n{path.read_bytes().decode(errors='replace')}" for path in sorted(root.rglob("*")) if path.is_file())


def _options(endpoint: str, *, secret: str = "testing") -> dict[str, Any]:
    options = s3_storage_options(endpoint, fast_fail=True)
    options["secret"] = secret
    return options


def _cases(moto_server: MotoServer) -> list[tuple[str, dict[str, Any]]]:
    """(url, storage options) of failing syncs: an endpoint with a token in its query; a credential in the bucket part."""
    bucket = make_s3_spec(moto_server).url
    return [
        (bucket, _options(f"{moto_server.endpoint_url}/?token={TOKEN}")),
        (bucket.replace("s3://", f"s3://{BUCKET_KEY}:{BUCKET_SECRET}@", 1), _options(moto_server.endpoint_url)),
        (bucket, _options(f"http://127.0.0.1:{free_port()}/?X-Amz-Signature={TOKEN}", secret=OPTION_SECRET)),  # refused connection
    ]


def test_a_failing_sync_on_the_command_line_shows_no_secret(tmp_path: Path, moto_server: MotoServer) -> None:
    home = tmp_path / "home"
    with agentfs.open(home) as store:
        store.run("r").commit({"step": 1})
    cases = _cases(moto_server)
    commands = [("sync", url, options) for url, options in cases]
    commands += [("pull", *cases[1]), ("clone", *cases[0])]
    for command, url, options in commands:
        target = (str(tmp_path / "clone"),) if command == "clone" else ()
        result = cli(command, url, *target, "--storage-options", json.dumps(options), store=home)
        assert result.returncode == 4, result
        assert "agentfs: error: remote " in result.stderr  # the failure is reported...
        _absent(result.stdout + result.stderr, f"`agentfs {command}`")  # ...without the secret
    status = cli("status", "--json", store=home)
    assert json.loads(status.stdout)["remotes"] and all(remote["last_error"] for remote in json.loads(status.stdout)["remotes"])
    _absent(status.stdout + status.stderr, "status --json")
    _absent(_store_bytes(home), "the store's files (remote status files included)")


def test_a_succeeding_sync_shows_no_secret(tmp_path: Path, moto_server: MotoServer) -> None:
    home = tmp_path / "home"
    with agentfs.open(home) as store:
        store.run("r").commit({"step": 1})
    url = make_s3_spec(moto_server).url
    options = json.dumps(_options(moto_server.endpoint_url, secret=OPTION_SECRET))
    for args in (("sync", url), ("pull", url), ("status", "--json")):
        result = cli(*args, *(("--storage-options", options) if args[0] != "status" else ()), store=home)
        assert result.returncode == 0, result
        _absent(result.stdout + result.stderr, f"`agentfs {args[0]}`")
    _absent(_store_bytes(home), "the store's files")


def test_the_sync_daemon_logs_and_publishes_no_secret(tmp_path: Path, moto_server: MotoServer) -> None:
    home = tmp_path / "home"
    with agentfs.open(home) as store:
        store.run("r").commit({"step": 1})
    url, options = _cases(moto_server)[0]
    daemon = subprocess.Popen(
        [
            *COMMAND,
            "--store",
            str(home),
            "sync",
            url,
            "--watch",
            "--interval",
            "0.2",
            "--drain-timeout",
            "0.5",
            "--storage-options",
            json.dumps(options),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=ENV,
    )
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not _last_error(home):
        time.sleep(0.2)
    daemon.send_signal(signal.SIGTERM)
    out, err = daemon.communicate(timeout=60)
    assert "failed" in err  # the daemon logged its failing pushes...
    _absent(out + err, "the daemon's log")  # ...without the secret
    status = cli("status", "--json", store=home).stdout
    assert json.loads(status)["remotes"][0]["last_error"]
    _absent(status, "status --json after the daemon")
    _absent(_store_bytes(home), "the store's files")


def _last_error(home: Path) -> str | None:
    with agentfs.open(home) as store:
        remotes = store.stats().remotes
    return remotes[0].last_error if remotes else None


def test_the_api_raises_logs_and_publishes_no_secret(tmp_path: Path, moto_server: MotoServer, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="agentfs")
    with agentfs.open(tmp_path / "home") as store:
        store.run("r").commit({"step": 1})
        for url, options in _cases(moto_server):
            with pytest.raises(agentfs.RemoteError) as raised:
                pull(store.engine, PackRemote(url, options))
            _absent(str(raised.value), "a pull's error")
            with pytest.raises(agentfs.RemoteError) as raised:
                agentfs.open(tmp_path / "lazy", remote=url, storage_options=options)
            _absent(str(raised.value), "open(remote=...)'s error")
            daemon = store.sync(url, options, interval=0.1, max_backoff=0.2)
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and not daemon.status(rescan=False)["last_error"]:
                time.sleep(0.1)
            assert not daemon.stop(timeout=0.1)
            status = daemon.status()
            assert status["last_error"]
            _absent(json.dumps(status), "the daemon's status")
            _absent(repr(daemon), "the daemon")
    _absent(caplog.text, "the log")
    _absent(_store_bytes(tmp_path / "home"), "the store's files")


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("https://user:pa55word@host/x", "pa55word"),
        ("read AKIAXX:s3cr3tValue@bucket/prefix/config failed", "s3cr3tValue"),
        ("GET https://b.s3.amazonaws.com/k?X-Amz-Credential=AKIA%2F&X-Amz-Signature=abcdef0123 failed", "abcdef0123"),
        ("endpoint `http://10.0.0.1:9000/?token=zzTOKENzz` was not a valid URI", "zzTOKENzz"),
        ("bad parameter signature=ffee9988 in request", "ffee9988"),
    ],
)
def test_scrub_removes_what_looks_like_a_credential(text: str, secret: str) -> None:
    assert secret not in scrub(text)


def test_a_redactor_hides_its_remotes_storage_option_values_and_keeps_the_rest() -> None:
    redactor = Redactor("s3://bucket/p", {"key": "AKIAEXAMPLE1234", "client_kwargs": {"endpoint_url": "http://h:9000/?token=tk-998877"}})
    shown = redactor.text("key AKIAEXAMPLE1234 endpoint http://h:9000/?token=tk-998877 run r@01ABC bucket/p/config")
    assert "AKIAEXAMPLE1234" not in shown and "tk-998877" not in shown
    assert "http://h:9000/" in shown and "r@01ABC" in shown and "bucket/p/config" in shown
    assert redact_url("s3://k:s@bucket/p?versionId=1#f") == "s3://bucket/p"


def test_status_shows_no_secret_an_older_agentfs_kept(tmp_path: Path) -> None:
    """An agentfs before this redaction kept a URL's query string in remotes/<name>/url and its status."""
    home, url = tmp_path / "home", (tmp_path / "remote").as_uri()
    with agentfs.open(home) as store:
        store.run("r").commit({"step": 1})
    assert cli("sync", url, store=home).returncode == 0
    (directory,) = (home / "remotes").iterdir()
    (directory / "url").write_text(f"{url}?token={TOKEN}")
    (directory / "status.json").write_text(json.dumps({"last_error": f"GET {url}/config?X-Amz-Signature={TOKEN} failed"}))
    with agentfs.open(home) as store:
        (remote,) = store.stats().remotes
    assert remote.url == f"{url}?***" and remote.last_error
    _absent(f"{remote.url} {remote.last_error}", "the status an older agentfs wrote")
