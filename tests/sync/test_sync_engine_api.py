"""sync/ reaches the local store only through the engine API (engine/repository.py, "The engine API").

Its own private state (push index, status, on-commit lines) lies in the directory
`Repository.remote_state_dir` gives it; no path of the store's own layout appears in sync/.
"""

from __future__ import annotations

import re
from pathlib import Path

import agentfs
from agentfs.sync.pack_remote import PackRemote
from agentfs.sync.push import Pusher

SYNC = Path(agentfs.__file__).parent / "sync"
# what sync/ used to reach format 1's files with; the engine API replaces each
STORE_PATHS = re.compile(r"\b(entry_path|record_dir|log_dir|db\.path|tmp_dir|runs_dir|objects_dir|remotes_dir|locks_dir|segments_dir)\b")


def test_sync_reaches_the_store_only_through_the_engine_api() -> None:
    found = [
        f"{path.name}:{number}: {line.strip()}"
        for path in sorted(SYNC.glob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if STORE_PATHS.search(line)
    ]
    assert found == []


def test_remote_state_lies_in_the_directory_the_repository_gives(tmp_path: Path) -> None:
    store = agentfs.open(tmp_path / "a")
    store.run("r").commit({"n": 1})
    url = str(tmp_path / "remote")
    Pusher(store.engine, PackRemote(url, {})).push()
    (name,) = store.engine.remote_state_names()
    directory = store.engine.remote_state_dir(name)
    assert (directory / "url").read_text() == f"file://{url}"
    assert ("r", store.run("r").latest().id) in {tuple(line.split(" ")) for line in (directory / "entries").read_text().splitlines()}
