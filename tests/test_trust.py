"""Sync you can trust (issue 11, the parts that do not depend on the storage format).

Ids made behind a skewed clock, create-only keys compared, bytes re-hashed before upload, remotes
identified by their config, remote failures as RemoteError, prompt shutdown, status after a
one-shot sync, one remote per directory however its URL is spelled. Real processes, real files,
moto's S3 server.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import agentfs
from tests.clock import skewed_env

HELPERS = Path(__file__).parent / "helpers"


def remote_entry_ids(remote_dir: Path, run: str) -> list[str]:
    return sorted(p.name for p in (remote_dir / "runs" / run / "log").iterdir())


def test_machines_behind_the_head_they_resume_from_make_distinct_ids_and_push_both(tmp_path: Path) -> None:
    remote_dir = tmp_path / "remote"
    url = remote_dir.as_uri()
    ahead = subprocess.run(
        [sys.executable, "-c", "import time; print(time.time())"], env=skewed_env("+1h"), capture_output=True, text=True, check=True
    )
    assert float(ahead.stdout) - time.time() > 3000, "libfaketime does not move this Python's clock"
    writer = (
        "import sys, agentfs\n"
        "with agentfs.open(sys.argv[1]) as store:\n"
        "    store.run('shared').commit({'step': 0})\n"
        "    with store.sync(sys.argv[2]) as daemon:\n"
        "        assert daemon.flush(timeout=20)\n"
    )
    subprocess.run([sys.executable, "-c", writer, str(tmp_path / "ahead"), url], env=skewed_env("+1h"), check=True, timeout=60)
    (head,) = remote_entry_ids(remote_dir, "shared")

    machines = [
        subprocess.Popen(
            [sys.executable, str(HELPERS / "resume_commit.py"), str(tmp_path / f"machine-{n}"), url, "shared"],
            env=skewed_env("-5s"),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for n in range(2)
    ]
    for machine in machines:
        assert machine.stdout is not None and machine.stdout.readline().split() == ["ready", head]
    for machine in machines:  # both commit on the same head at (nearly) the same moment
        assert machine.stdin is not None
        machine.stdin.write("go\n")
        machine.stdin.flush()
    made = []
    for machine in machines:
        out, _ = machine.communicate(timeout=60)
        assert machine.returncode == 0, out
        made.append(out.split()[-1])
    assert made[0] != made[1]
    assert all(made_id > head for made_id in made)
    assert remote_entry_ids(remote_dir, "shared") == sorted([head, *made])
    with agentfs.open(tmp_path / "reader", remote=url) as reader:
        assert {cp.parent for cp in reader.run("shared").history() if cp.id != head} == {head}
