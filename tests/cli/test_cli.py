"""The `agentfs` console script, run as a user runs it: a subprocess per command."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import agentfs
from agentfs.engine.object_store import ObjectWriter
from agentfs.format.refs import TreeRef
from tests.helpers import raw

AGENTFS = shutil.which("agentfs", path=str(Path(sys.executable).parent))
COMMAND = [AGENTFS] if AGENTFS else [sys.executable, "-m", "agentfs.cli.main"]
ENV = {key: value for key, value in os.environ.items() if key != "AGENTFS_STORE"}


def cli(
    *args: str, store: Path | None = None, cwd: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    prefix = ["--store", str(store)] if store is not None else []
    return subprocess.run(
        [*COMMAND, *prefix, *args], capture_output=True, text=True, cwd=cwd, env={**ENV, **(env or {})}, timeout=60, check=False
    )


def json_of(result: subprocess.CompletedProcess[str]) -> Any:
    assert result.stderr == ""
    return json.loads(result.stdout)


def assert_error(result: subprocess.CompletedProcess[str], code: int, *named: str) -> None:
    assert result.returncode == code, result
    assert result.stderr.startswith("agentfs: ") and "error" in result.stderr
    assert "Traceback" not in result.stderr
    for text in named:
        assert text in result.stderr


def test_help_documents_exit_codes_and_version() -> None:
    result = cli("--help")
    assert result.returncode == 0
    assert "exit codes" in result.stdout
    for code in ("0", "1", "2", "3", "4", "130", "141"):
        assert f"\n  {code} " in result.stdout
    assert cli("--version").stdout.strip() == f"agentfs {agentfs.__version__}"
    assert cli().returncode == 2


def test_init_creates_the_default_store_once(tmp_path: Path) -> None:
    result = cli("init", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    root = tmp_path / ".agentfs"
    assert (root / "config").is_file()
    with agentfs.open(root) as store:
        store_id = store.id
    assert str(root) in result.stdout and store_id in result.stdout
    again = json_of(cli("init", "--json", cwd=tmp_path))
    assert again == {"path": str(root), "id": store_id, "created": False}


def test_store_comes_from_the_environment_unless_given(tmp_path: Path) -> None:
    env = {"AGENTFS_STORE": str(tmp_path / "from-env")}
    assert json_of(cli("init", "--json", env=env, cwd=tmp_path))["created"] is True
    with agentfs.open(tmp_path / "from-env") as store:
        store.run("envrun").commit({"step": 1})
    assert [run["name"] for run in json_of(cli("runs", "--json", env=env))["runs"]] == ["envrun"]
    assert_error(cli("runs", store=tmp_path / "elsewhere", env=env), 3, str(tmp_path / "elsewhere"))


def test_a_missing_store_is_not_found_and_not_created(tmp_path: Path) -> None:
    for args in (["runs"], ["log", "r"]):
        assert_error(cli(*args, cwd=tmp_path), 3, "no agentfs store", str(tmp_path / ".agentfs"))
    assert not (tmp_path / ".agentfs").exists()


def test_runs_lists_count_and_head(store: agentfs.Store) -> None:
    store.run("research/a").commit({"step": 1})
    head = store.run("research/a").commit({"step": 2})
    other = store.run("b").commit({"step": 1})
    text = cli("runs", store=store.root)
    assert text.returncode == 0
    assert text.stdout.splitlines()[0].split() == ["RUN", "CHECKPOINTS", "HEAD", "CREATED"]
    assert f"research/a  2            {head.id}" in text.stdout
    assert json_of(cli("runs", "--json", store=store.root)) == {
        "runs": [
            {"name": "b", "checkpoints": 1, "head": other.id, "head_created": other.created.isoformat(timespec="microseconds")},
            {"name": "research/a", "checkpoints": 2, "head": head.id, "head_created": head.created.isoformat(timespec="microseconds")},
        ]
    }


def test_log_is_newest_first_with_parents_and_metadata(store: agentfs.Store) -> None:
    run = store.run("loop")
    note = "two\nlines \x1b[31mred"  # printed escaped, on the checkpoint's one line
    cps = [run.commit({"step": i}, metadata={"step": i, "source": "loop", "note": note}) for i in range(3)]
    text = cli("log", "loop", store=store.root)
    assert text.returncode == 0
    lines = text.stdout.splitlines()
    assert [line.split()[0] for line in lines] == [cp.id for cp in reversed(cps)]
    assert "(head)" in lines[0] and f"parent {cps[1].id}" in lines[0] and "step=2 source=loop note=two\\nlines \\x1b[31mred" in lines[0]
    assert "root" in lines[2] and "fork" not in text.stdout
    document = json_of(cli("log", "loop", "--json", store=store.root))
    assert document["run"] == "loop"
    assert [entry["id"] for entry in document["checkpoints"]] == [cp.id for cp in reversed(cps)]
    assert document["checkpoints"][0] == {
        "id": cps[2].id,
        "parent": cps[1].id,
        "created": cps[2].created.isoformat(timespec="microseconds"),
        "metadata": {"step": 2, "source": "loop", "note": note},
        "forked_from": None,
        "siblings": [],
    }
    forked = run.fork(cps[1].id, "loop-b").latest()
    assert forked is not None
    assert f"(forked from loop@{cps[1].id})" in cli("log", "loop-b", store=store.root).stdout
    assert json_of(cli("log", "loop-b", "--json", store=store.root))["checkpoints"][0]["forked_from"] == {"run": "loop", "id": cps[1].id}


def test_log_marks_a_fork_made_on_another_machine(tmp_path: Path) -> None:
    root_a, root_b = tmp_path / "a", tmp_path / "b"
    with agentfs.open(root_a) as store_a:
        base = store_a.run("shared").commit({"step": 0, "notes": "n" * 500})
    shutil.copytree(root_a, root_b)
    with agentfs.open(root_a) as store_a, agentfs.open(root_b) as store_b:
        mine = store_a.run("shared").commit({"step": 1, "notes": "n" * 500}, parent=base.id)
        theirs = store_b.run("shared").commit({"step": 1, "notes": "m" * 500}, parent=base.id)
    # what a pull from the other machine does: its entry arrives beside ours
    raw.set_record_bytes(root_a, "shared", raw.LOG_RECORDS, theirs.id, raw.record_bytes(root_b, "shared", raw.LOG_RECORDS, theirs.id))
    text = cli("log", "shared", store=root_a)
    assert text.returncode == 0, text.stderr
    lines = {line.split()[0]: line for line in text.stdout.splitlines()}
    assert f"(fork: same parent as {mine.id})" in lines[theirs.id]
    assert f"(fork: same parent as {theirs.id})" in lines[mine.id]
    assert "fork" not in lines[base.id]
    entries = {entry["id"]: entry for entry in json_of(cli("log", "shared", "--json", store=root_a))["checkpoints"]}
    assert entries[mine.id]["siblings"] == [theirs.id] and entries[theirs.id]["siblings"] == [mine.id]
    assert entries[mine.id]["parent"] == entries[theirs.id]["parent"] == base.id
    assert cli("verify", store=root_a).returncode == 0


def test_show_names_state_keys_and_artifacts_with_sizes(store: agentfs.Store) -> None:
    run = store.run("r")
    first = run.commit({"step": 1}, metadata={"why": "start"})
    when = dt.datetime(2024, 5, 1, 12, tzinfo=dt.timezone.utc)
    head = run.commit({"step": 2, "messages": ["hello"] * 50, "when": when}, artifacts={"report.md": b"# report\n" * 300})
    text = cli("show", "r", store=store.root)
    assert text.returncode == 0
    assert f"r@{head.id}" in text.stdout and f"parent      {first.id}" in text.stdout
    assert "state: 3 keys" in text.stdout and "  messages" in text.stdout
    assert "report.md  2.6 KiB" in text.stdout
    by_id = json_of(cli("show", f"r@{first.id}", "--json", store=store.root))
    assert by_id["id"] == first.id and by_id["parent"] is None and by_id["metadata"] == {"why": "start"}
    document = json_of(cli("show", "r", "--json", store=store.root))
    assert list(document) == ["run", "id", "parent", "created", "writer", "forked_from", "metadata", "state_kind", "state", "artifacts"]
    assert document["state_kind"] == "map" and list(document["state"]) == ["step", "messages", "when"]
    assert document["artifacts"] == {"report.md": {"size": 2700}}
    assert document["writer"]["store"] == store.id
    state = json_of(cli("show", "r", "--state", store=store.root))
    assert state == {"step": 2, "messages": ["hello"] * 50, "when": repr(when)}
    assert json_of(cli("show", "r", "--state", "--json", store=store.root))["value"] == state


def test_cat_streams_a_multi_chunk_artifact_byte_exact(store: agentfs.Store) -> None:
    data = os.urandom(3 << 20)
    old = store.run("r").commit({}, artifacts={"blob.bin": data})
    store.run("r").commit({}, artifacts={"blob.bin": b"newer"})
    assert isinstance(old.manifest.artifacts["blob.bin"], TreeRef)  # several chunks
    result = subprocess.run(
        [*COMMAND, "--store", str(store.root), "cat", f"r@{old.id}", "blob.bin"], capture_output=True, env=ENV, check=False
    )
    assert result.returncode == 0 and result.stderr == b""
    assert result.stdout == data
    assert cli("cat", "r", "blob.bin", store=store.root).stdout == "newer"


def test_cat_into_a_closed_pipe_or_interrupted_exits_quietly(store: agentfs.Store) -> None:
    store.run("r").commit({}, artifacts={"blob.bin": os.urandom(3 << 20)})
    args = [*COMMAND, "--store", str(store.root), "cat", "r", "blob.bin"]
    with subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV) as reader_quits:
        assert reader_quits.stdout is not None and reader_quits.stderr is not None
        assert len(reader_quits.stdout.read(10)) == 10
        reader_quits.stdout.close()
        assert reader_quits.wait(timeout=30) == 141
        assert reader_quits.stderr.read() == b""
    with subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=ENV) as interrupted:
        assert interrupted.stdout is not None and interrupted.stderr is not None
        assert interrupted.stdout.read(1)  # it is writing, blocked on the full pipe
        interrupted.send_signal(signal.SIGINT)
        interrupted.stdout.read()
        assert interrupted.wait(timeout=30) == 130
        assert b"Traceback" not in interrupted.stderr.read()


def test_diff_compares_state_keys_and_artifacts(store: agentfs.Store) -> None:
    keep = "k" * 200  # packed in the first entry; the second refers to it there
    a = store.run("r").commit(
        {"keep": keep, "changed": "x" * 100, "gone": [1], "tiny": 1}, artifacts={"same.txt": b"same" * 100, "old.txt": b"old"}
    )
    b = store.run("r").commit(
        {"keep": keep, "changed": "y" * 150, "tiny": 1, "new": 2}, artifacts={"same.txt": b"same" * 100, "new.txt": b"new!"}
    )
    assert a.manifest.state["keep"].blob != b.manifest.state["keep"].blob  # same bytes, refs differ in location only
    document = json_of(cli("diff", f"r@{a.id}", "r", "--json", store=store.root))
    gone, old_size, new_size = (value_size(cp, key) for cp, key in ((a, "gone"), (a, "changed"), (b, "changed")))
    assert document == {
        "a": {"run": "r", "id": a.id},
        "b": {"run": "r", "id": b.id},
        "same": False,
        "state": {
            "added": [{"name": "new", "size": value_size(b, "new")}],
            "removed": [{"name": "gone", "size": gone}],
            "changed": [{"name": "changed", "size_a": old_size, "size_b": new_size}],
        },
        "artifacts": {
            "added": [{"name": "new.txt", "size": 4}],
            "removed": [{"name": "old.txt", "size": 3}],
            "changed": [],
        },
    }
    text = cli("diff", f"r@{a.id}", "r", store=store.root)
    assert text.returncode == 1
    assert text.stdout.splitlines()[:2] == [f"--- r@{a.id}", f"+++ r@{b.id}"]
    assert "  +  new " in text.stdout and "  -  gone " in text.stdout
    assert f"  ~  changed  {old_size} B -> {new_size} B" in text.stdout
    assert "keep" not in text.stdout and "same.txt" not in text.stdout
    copy = store.run("r").fork(b.id, "r-copy").latest()
    assert copy is not None
    same = cli("diff", "r", "r-copy", "--json", store=store.root)
    assert same.returncode == 0 and json_of(same)["same"] is True


def value_size(checkpoint: agentfs.Checkpoint, key: str) -> int:
    """Bytes of one serialized state value, as the manifest records it."""
    return checkpoint.manifest.state[key].blob.size


def test_verify_exits_1_naming_a_corrupt_object(store: agentfs.Store) -> None:
    store.run("r").commit({}, artifacts={"blob.bin": os.urandom(1 << 20)})
    clean = cli("verify", store=store.root)
    assert clean.returncode == 0 and clean.stdout.endswith(": ok\n")
    victim = next(oid for oid in sorted(raw.object_ids(store)) if len(raw.object_bytes(store, oid)) > 1000)
    raw.corrupt_object(store, victim)
    named = victim.hex()[2:]  # what names the object both in a path (objects/ab/<rest>) and as a whole id
    result = cli("verify", store=store.root)
    assert result.returncode == 1
    assert named in result.stdout and "problem" in result.stdout
    document = json_of(cli("verify", "--json", store=store.root))
    assert document["ok"] is False and document["checkpoints"] == 1
    assert any(p["kind"] == "corrupt" and named in p["where"] for p in document["problems"]), document["problems"]
    assert_error(cli("cat", "r", "blob.bin", store=store.root), 4, named)


def test_gc_deletes_only_unreferenced_objects_past_the_grace(store: agentfs.Store) -> None:
    data = os.urandom(1 << 20)
    kept = store.run("r").commit({}, artifacts={"blob.bin": data})
    writer = ObjectWriter(store.engine.db, store.engine.pool)
    orphan = writer.add(os.urandom(100_000))
    store.engine.db.append(writer.finish(), True)  # what a crashed commit leaves: objects, no entry
    raw.age_objects(store, [orphan], 7200)
    document = json_of(cli("gc", "--grace", "86400", "--json", store=store.root))
    expected = {"deleted": 0, "bytes_freed": 0, "kept": document["kept"], "temp_deleted": 0, "pruned": 0, "damaged": []}
    assert document == expected and document["kept"] > 1
    assert raw.has_object(store, orphan)
    text = cli("gc", store=store.root)
    assert text.returncode == 0 and text.stdout.startswith("deleted 1 object (")
    assert not raw.has_object(store, orphan)
    assert cli("verify", store=store.root).returncode == 0
    assert kept.artifacts["blob.bin"].read_bytes() == data
    assert cli("gc", "--grace", "-1", store=store.root).returncode == 2


def test_errors_name_what_was_wrong_with_reliable_exit_codes(store: agentfs.Store) -> None:
    cp = store.run("r").commit({"step": 1})
    unknown_id = "0" * 26
    assert_error(cli("log", "nope", store=store.root), 3, "'nope'")
    assert_error(cli("show", f"r@{unknown_id}", store=store.root), 3, unknown_id)
    assert_error(cli("cat", "r", "missing.txt", store=store.root), 3, "'missing.txt'")
    assert_error(cli("diff", "r", "nope", store=store.root), 3, "'nope'")
    assert_error(cli("show", "../escape", store=store.root), 2, "'../escape'")
    assert_error(cli("cat", "r", "../../etc/passwd", store=store.root), 2, "'../../etc/passwd'")
    assert_error(cli("show", "r@not-an-id", store=store.root), 2, "'not-an-id'")
    assert cli("show", f"r@{cp.id}", "--bogus", store=store.root).returncode == 2
