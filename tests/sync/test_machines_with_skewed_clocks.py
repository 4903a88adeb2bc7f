"""Machines with skewed clocks sharing a remote, on a file remote and on moto's S3: three stores in three directories,
processes under libfaketime with clocks seconds apart (two behind the head they resume from), rounds
of resume + commit on the same head at the same moment, push, kill -9 mid-commit and mid-push,
prune + sync + remote gc, pull. At the end, from a fresh store: every checkpoint whose push was
confirmed is on the remote with its exact state, no remote key's bytes were replaced, `verify
--remote --deep` is clean, divergence is reported and nothing retired comes back."""

from __future__ import annotations

import hashlib
import itertools
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

import agentfs
from tests.cli.test_cli import COMMAND, cli
from tests.clock import skewed_env
from tests.servers import AWS_KEY, AWS_REGION, AWS_SECRET, make_s3_spec

HELPERS = Path(__file__).parents[1] / "helpers"
COMMIT_FOREVER = (
    "import sys, agentfs\n"
    "with agentfs.open(sys.argv[1]) as store:\n"
    "    run = store.run(sys.argv[2])\n"
    "    for n in range(100000):\n"
    "        made = run.commit({'n': n}, artifacts={'blob.bin': bytes([n % 256]) * 30000})\n"
    "        print(made.id, n, flush=True)\n"
)


@dataclass(frozen=True)
class SharedRemote:
    """The remote the machines share: its URL, the environment that reaches it, and a snapshot of its keys."""

    url: str
    env: dict[str, str]
    snapshot: Callable[[], dict[str, str]]


def _file_remote(tmp_path: Path) -> SharedRemote:
    root = tmp_path / "remote"

    def snapshot() -> dict[str, str]:
        return {
            str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in root.rglob("*")
            if p.is_file() and p.relative_to(root).parts[0] not in ("tmp", "gc")
        }

    return SharedRemote(root.as_uri(), {}, snapshot)


def _s3_remote(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> SharedRemote:
    moto = request.getfixturevalue("moto_server")
    spec = make_s3_spec(moto)
    # every process (CLI, helpers, this one) reaches moto through the environment, as a user's would
    env = {"AWS_ENDPOINT_URL": moto.endpoint_url, "AWS_ACCESS_KEY_ID": AWS_KEY, "AWS_SECRET_ACCESS_KEY": AWS_SECRET}
    env["AWS_DEFAULT_REGION"] = AWS_REGION
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    fs, root = spec.connect()

    def snapshot() -> dict[str, str]:
        # the ETag and a hash of the bytes of every key: either changing means a key was replaced
        listed = fs.find(root, detail=True)
        return {
            key.removeprefix(root + "/"): f"{info['ETag']} {hashlib.sha256(fs.cat_file(key)).hexdigest()}"
            for key, info in listed.items()
            if key.removeprefix(root + "/").split("/")[0] not in ("tmp", "gc")
        }

    return SharedRemote(spec.url, env, snapshot)


@pytest.fixture(params=["file", "s3"])
def shared_remote(request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SharedRemote:
    return _file_remote(tmp_path) if request.param == "file" else _s3_remote(request, monkeypatch)


def _assert_nothing_replaced(before: dict[str, str], after: dict[str, str]) -> None:
    assert {key: after[key] for key in before if key in after} == {key: digest for key, digest in before.items() if key in after}


def _sync(store: Path, remote: SharedRemote) -> None:
    result = cli("sync", remote.url, store=store, env=remote.env)
    assert result.returncode == 0, result.stderr


def _resume_round(machines: dict[str, str], url: str, run: str) -> dict[tuple[str, str], object]:
    """Each machine (directory -> clock offset) resumes `run`, all commit on its head at once, and push."""
    procs = [
        subprocess.Popen(
            [sys.executable, str(HELPERS / "resume_commit.py"), directory, url, run],
            env=skewed_env(offset),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for directory, offset in machines.items()
    ]
    heads = set()
    for proc in procs:
        assert proc.stdout is not None
        heads.add(proc.stdout.readline().split()[1])
    (head,) = heads
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    for proc in procs:  # every machine committed before any pushes (helpers/resume_commit.py)
        assert proc.stdout is not None and proc.stdout.readline().split()[0] == "committed"
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("push\n")
        proc.stdin.flush()
    confirmed: dict[tuple[str, str], object] = {}
    for proc in procs:
        out, _ = proc.communicate(timeout=60)
        assert proc.returncode == 0, out
        confirmed[(run, out.split()[-1])] = {"resumed_from": head}
    return confirmed


def _kill_mid_commit(store: Path, run: str, offset: str) -> dict[tuple[str, str], object]:
    """Commit in a loop under a skewed clock, kill -9 after a few acknowledgements; those must survive."""
    proc = subprocess.Popen(
        [sys.executable, "-c", COMMIT_FOREVER, str(store), run], env=skewed_env(offset), stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None
    acked = {}
    for _ in range(8):
        checkpoint_id, n = proc.stdout.readline().split()
        acked[(run, checkpoint_id)] = int(n)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    with agentfs.open(store) as opened:
        return {(run, cid): {"n": n} for (run, cid), n in acked.items() if opened.run(run).get(cid).state == {"n": n}}


def test_three_machines_with_skewed_clocks_lose_nothing_hide_nothing_and_resurrect_nothing(
    tmp_path: Path, shared_remote: SharedRemote
) -> None:
    url, env = shared_remote.url, shared_remote.env
    a, b, c = (str(tmp_path / name) for name in ("a", "b", "c"))
    seed = (
        "import sys, agentfs\n"
        "with agentfs.open(sys.argv[1]) as s:\n"
        "    s.run('shared').commit({'seed': 1})\n"
        "    s.run('old').commit({'old': 1})\n"
    )
    subprocess.run([sys.executable, "-c", seed, a], env=skewed_env("+3s"), check=True, timeout=60)
    _sync(Path(a), shared_remote)
    confirmed: dict[tuple[str, str], object] = {}
    with agentfs.open(a) as store:
        confirmed.update({(run, store.run(run).head_id() or ""): store.run(run).latest().state for run in ("shared", "old")})
    snapshots = [shared_remote.snapshot()]

    # round 1: b and c, clocks behind the head they resume from, commit on it at the same moment
    confirmed.update(_resume_round({b: "-4s", c: "-2s"}, url, "shared"))
    snapshots.append(shared_remote.snapshot())

    # kill -9 mid-commit on b, then push what it acknowledged
    confirmed.update(_kill_mid_commit(Path(b), "b-work", "-1s"))
    _sync(Path(b), shared_remote)
    snapshots.append(shared_remote.snapshot())

    # kill -9 mid-push on c, then push again
    with agentfs.open(c) as store:
        for n in range(20):
            made = store.run("c-work").commit({"n": n}, artifacts={"blob.bin": bytes([n]) * 50_000})
            confirmed[("c-work", made.id)] = {"n": n}
    pushing = subprocess.Popen([*COMMAND, "--store", c, "sync", url], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.4)
    pushing.send_signal(signal.SIGKILL)
    pushing.wait(timeout=10)
    _sync(Path(c), shared_remote)
    snapshots.append(shared_remote.snapshot())

    # prune + sync + remote gc on a; the retired checkpoints must never come back
    assert cli("pull", url, store=Path(a), env=env).returncode == 0
    with agentfs.open(a) as store:
        store.run("old").commit({"old": 2})
        retired = store.run("old").prune(keep_last=1).removed
        confirmed[("old", store.run("old").head_id() or "")] = {"old": 2}
    assert retired
    for run_id in retired:
        confirmed.pop(("old", run_id), None)
    _sync(Path(a), shared_remote)
    gc = cli("gc", "--remote", url, "--settle", "3", "--grace", "0", store=Path(a), env=env)
    assert gc.returncode == 0, gc.stderr
    snapshots.append(shared_remote.snapshot())
    assert all(snapshots), "a round left the remote empty: the snapshot listed nothing"
    for earlier, later in itertools.pairwise(snapshots):
        _assert_nothing_replaced(earlier, later)

    # the other machines pull: nothing retired comes back, divergence is reported
    for machine in (b, c):
        pulled = cli("pull", url, store=Path(machine), env=env)
        assert pulled.returncode == 0 and "shared has diverged" in pulled.stderr
        with agentfs.open(machine) as store:
            assert not set(store.run("old").ids()) & set(retired)
    fresh = tmp_path / "fresh"
    assert cli("pull", url, store=fresh, env=env).returncode == 0
    with agentfs.open(fresh) as store:
        for (run, checkpoint_id), state in confirmed.items():
            assert store.run(run).get(checkpoint_id).state == state
        assert not set(store.run("old").ids()) & set(retired)
        assert len(store.run("shared").heads()) == 2
    with agentfs.open(tmp_path / "lazy", remote=url) as lazy:
        assert not set(lazy.run("old").ids()) & set(retired)
    deep = cli("verify", "--remote", url, "--deep", env=env)
    assert deep.returncode == 0, deep.stdout
