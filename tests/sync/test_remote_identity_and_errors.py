"""A remote is identified, and every remote failure is one clear RemoteError.

A URL with no agentfs config (a typo'd bucket, prefix or directory) is an error naming it for
clone, pull, verify --remote and open(remote=); only a push creates a remote's config; a newer
format is refused; no credentials, an unreachable endpoint and a missing bucket are one line and
exit 4, never a botocore traceback; `status` knows one-shot syncs; one remote per directory however
its URL is spelled. Real processes, real files, moto's S3 server.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import agentfs
from agentfs.format.config import REMOTE_FORMAT
from agentfs.format.keys import digest
from tests.cli.test_cli import cli, json_of
from tests.servers import AWS_REGION, MotoServer, RemoteSpec, free_port, make_s3_spec, s3_storage_options


def pushed_store(path: Path, url: str, storage_options: dict[str, str] | None = None) -> agentfs.Checkpoint:
    with agentfs.open(path) as store:
        made = store.run("main").commit({"step": 1})
        with store.sync(url, storage_options) as daemon:
            assert daemon.flush(timeout=20)
        return made


def assert_refused(result: object, url: str, code: int = 4) -> None:
    stderr = result.stderr  # type: ignore[attr-defined]
    assert result.returncode == code, stderr  # type: ignore[attr-defined]
    assert url in stderr and "Traceback" not in stderr
    assert len(stderr.strip().splitlines()) == 1, stderr


def test_a_typo_d_directory_is_an_error_for_every_reader_and_clone_leaves_nothing(tmp_path: Path) -> None:
    pushed_store(tmp_path / "a", (tmp_path / "remote").as_uri())
    for typo in ((tmp_path / "remtoe").as_uri(), (tmp_path / "remote" / "runs").as_uri()):
        clone = cli("clone", typo, str(tmp_path / "copy" / ".agentfs"))
        assert_refused(clone, typo)
        assert "no agentfs store" in clone.stderr
        assert not (tmp_path / "copy").exists()
        assert_refused(cli("pull", typo, store=tmp_path / "a"), typo)
        assert_refused(cli("verify", "--remote", typo), typo)
        with pytest.raises(agentfs.RemoteError, match="holds no agentfs store"):
            agentfs.open(tmp_path / "b", remote=typo)
        assert not (tmp_path / "b").exists()
    assert not (tmp_path / "remtoe").exists()  # readers never create a remote's config
    assert cli("clone", (tmp_path / "remote").as_uri(), str(tmp_path / "copy")).returncode == 0


@pytest.mark.parametrize("remote", ["s3"], indirect=True)
def test_a_typo_d_bucket_or_prefix_is_an_error_naming_it(remote: RemoteSpec, tmp_path: Path) -> None:
    made = pushed_store(tmp_path / "a", remote.url, remote.storage_options)
    options = json.dumps(remote.storage_options)
    bucket = remote.url.split("/")[2]
    for typo in (remote.url.replace(bucket, bucket + "x"), remote.url + "x"):
        assert_refused(cli("clone", typo, str(tmp_path / "copy"), "--storage-options", options), typo)
        assert not (tmp_path / "copy").exists()
        assert_refused(cli("pull", typo, "--storage-options", options, store=tmp_path / "a"), typo)
        assert_refused(cli("verify", "--remote", typo, "--storage-options", options), typo)
        with pytest.raises(agentfs.RemoteError, match="holds no agentfs store"):
            agentfs.open(tmp_path / "b", remote=typo, storage_options=remote.storage_options)
    with agentfs.open(tmp_path / "c", remote=remote.url, storage_options=remote.storage_options) as reader:
        assert reader.run("main").latest().id == made.id


def test_a_remote_of_a_newer_format_is_refused_by_readers_and_pushers(tmp_path: Path) -> None:
    remote_dir = tmp_path / "remote"
    pushed_store(tmp_path / "a", remote_dir.as_uri())
    config = json.loads((remote_dir / "config").read_text())
    (remote_dir / "config").write_text(json.dumps({**config, "format": REMOTE_FORMAT + 1}))
    with agentfs.open(tmp_path / "a") as store:
        store.run("main").commit({"step": 2})
    for result in (cli("sync", remote_dir.as_uri(), store=tmp_path / "a"), cli("pull", remote_dir.as_uri(), store=tmp_path / "a")):
        assert result.returncode == 4 and "has format" in result.stderr and remote_dir.as_uri() in result.stderr
    assert len(list((remote_dir / "heads" / digest("main")).iterdir())) == 1  # nothing written into it
    with pytest.raises(agentfs.FormatError, match="has format"):
        agentfs.open(tmp_path / "b", remote=remote_dir.as_uri())


def no_credentials_env(tmp_path: Path) -> dict[str, str]:
    """An environment where botocore finds no credentials anywhere (and does not wait on an instance metadata service)."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("AWS_")}
    missing = str(tmp_path / "no-such-file")
    nowhere = {"AWS_SHARED_CREDENTIALS_FILE": missing, "AWS_CONFIG_FILE": missing, "AWS_EC2_METADATA_DISABLED": "true"}
    return {**env, "AWS_DEFAULT_REGION": AWS_REGION, **nowhere}


def test_remote_failures_are_one_line_exit_4_and_remote_errors(moto_server: MotoServer, tmp_path: Path) -> None:
    source = tmp_path / "a"
    with agentfs.open(source) as store:
        store.run("main").commit({"step": 1})
    spec = make_s3_spec(moto_server, fast_fail=True)
    bucket = spec.url.split("/")[2]
    unreachable = s3_storage_options(f"http://127.0.0.1:{free_port()}", fast_fail=True)
    no_keys = {k: v for k, v in spec.storage_options.items() if k not in ("key", "secret")}
    cases = [
        ("no credentials", spec.url, no_keys, no_credentials_env(tmp_path)),
        ("unreachable endpoint", spec.url, unreachable, None),
        ("missing bucket", spec.url.replace(bucket, bucket + "-missing"), spec.storage_options, None),
    ]
    for why, url, options, env in cases:
        for verb in (("sync", url), ("pull", url), ("clone", url, str(tmp_path / "copy"))):
            result = cli(*verb, "--storage-options", json.dumps(options), store=source, env=env)
            assert result.returncode == 4, (why, verb, result.stderr)
            assert url in result.stderr and "Traceback" not in result.stderr, (why, result.stderr)
            assert len(result.stderr.strip().splitlines()) == 1, (why, result.stderr)
            assert not (tmp_path / "copy").exists()
    for why, url, options, _env in cases[1:]:  # in Python: agentfs.RemoteError, an OSError, naming the URL
        with pytest.raises(agentfs.RemoteError, match=url.replace("/", ".")) as raised:
            agentfs.open(tmp_path / "b", remote=url, storage_options=options)
        assert isinstance(raised.value, OSError), why
    assert "secret" not in str(raised.value) and "testing" not in str(raised.value)


def test_status_shows_the_last_one_shot_push(tmp_path: Path) -> None:
    source = tmp_path / "a"
    with agentfs.open(source) as store:
        store.run("main").commit({"step": 1})
    url = (tmp_path / "remote").as_uri()
    assert cli("sync", url, store=source).returncode == 0
    (remote,) = json_of(cli("status", "--json", store=source))["remotes"]
    assert remote["last_push"] is not None and remote["lag_checkpoints"] == 0 and remote["last_error"] is None
    assert "last push:  never" not in cli("status", store=source).stdout


def test_one_directory_is_one_remote_however_it_is_spelled(tmp_path: Path) -> None:
    source = tmp_path / "a"
    with agentfs.open(source) as store:
        store.run("main").commit({"step": 1})
    spellings = [str(tmp_path / "remote"), (tmp_path / "remote").as_uri() + "/", "remote/"]
    outputs = [cli("sync", spelling, store=source, cwd=tmp_path).stdout for spelling in spellings]
    assert outputs[0].startswith("pushed 1 checkpoint,")
    assert all(out.startswith("pushed 0 checkpoints") for out in outputs[1:]), outputs
    assert len(list((source / "remotes").iterdir())) == 1
    (remote,) = json_of(cli("status", "--json", store=source))["remotes"]
    assert remote["remote"] == (tmp_path / "remote").as_uri()
