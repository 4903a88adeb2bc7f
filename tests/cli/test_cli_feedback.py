"""What a new user met in the CLI: silent successes on names that do not exist, silent empty output, grammar."""

from __future__ import annotations

from pathlib import Path

import agentfs
from tests.cli.test_cli import assert_error, cli, json_of
from tests.helpers import raw


def test_delete_of_a_run_that_does_not_exist_is_not_found(tmp_path: Path) -> None:
    root = tmp_path / ".agentfs"
    with agentfs.open(root) as store:
        store.run("real").commit({"i": 1})
    assert_error(cli("delete", "nosuchrun", store=root), 3, "'nosuchrun' not found")
    deleted = cli("delete", "real", store=root)
    assert deleted.returncode == 0 and deleted.stdout.startswith("real: removed 1 checkpoint, kept 0;")
    assert_error(cli("delete", "real", store=root), 3, "'real' not found")


def test_pull_of_a_run_the_remote_does_not_hold_is_not_found(tmp_path: Path) -> None:
    source, other = tmp_path / "a" / ".agentfs", tmp_path / "b" / ".agentfs"
    with agentfs.open(source) as store:
        store.run("real").commit({"i": 1})
    url = (tmp_path / "remote").as_uri()
    pushed = cli("sync", url, store=source)
    assert pushed.stdout.startswith("pushed 1 checkpoint, ")
    assert_error(cli("pull", url, "real", "nosuchrun", store=other), 3, "'nosuchrun' not found on ")
    assert json_of(cli("runs", "--json", store=other)) == {"runs": []}  # nothing pulled on a bad request
    pulled = cli("pull", url, "real", store=other)
    assert pulled.returncode == 0 and pulled.stdout.startswith("pulled 1 checkpoint, ")


def test_empty_listings_say_so(tmp_path: Path) -> None:
    root = tmp_path / ".agentfs"
    assert cli("init", store=root).returncode == 0
    runs = cli("runs", store=root)
    assert (runs.returncode, runs.stdout) == (0, f"no runs in {root}\n")
    with agentfs.open(root) as store:
        store.run("quiet").commit({"i": 1})
    journal = cli("journal", "quiet", store=root)
    assert journal.returncode == 0 and journal.stdout.startswith("run 'quiet' has no journal records")
    events = cli("journal", "quiet", "--events", store=root)
    assert events.returncode == 0 and events.stdout.startswith("run 'quiet' has no journal records")


def test_counts_of_one_are_singular(tmp_path: Path) -> None:
    root = tmp_path / ".agentfs"
    with agentfs.open(root) as store:
        only = store.run("r").commit({"i": 1})
    verified = cli("verify", store=root)
    assert verified.returncode == 0 and " 1 checkpoint: ok" in verified.stdout
    raw.set_record_bytes(root, "r", raw.LOG_RECORDS, only.id, b"damaged")
    broken = cli("verify", store=root)
    assert broken.returncode == 1 and broken.stdout.rstrip().endswith(": 1 problem")


def test_diff_shows_the_changed_values_truncated(tmp_path: Path) -> None:
    root = tmp_path / ".agentfs"
    messages = [{"role": "user", "content": f"message {i}"} for i in range(50)]
    with agentfs.open(root) as store:
        run = store.run("r")
        a = run.commit({"step": 3, "messages": messages, "config": {"model": "small", "t": 0.2}, "gone": "bye", "long": "x" * 500})
        b = run.commit(
            {
                "step": 4,
                "messages": [*messages, {"role": "assistant", "content": "hi"}],
                "config": {"model": "large", "t": 0.2, "seed": 7},
                "new": [1, 2],
                "long": "y" * 500,
            }
        )
    text = cli("diff", f"r@{a.id}", f"r@{b.id}", store=root)
    assert text.returncode == 1
    values = text.stdout.split("values:\n", 1)[1].splitlines()
    assert values[:2] == ["  + new: [1, 2]", '  - gone: "bye"']
    assert values[values.index("  ~ config:") : values.index("  ~ config:") + 4] == [
        "  ~ config:",
        '      - ["model"] "small"',
        '      + ["model"] "large"',
        '      + ["seed"] 7',
    ]
    assert values[values.index("  ~ messages:") : values.index("  ~ messages:") + 3] == [
        "  ~ messages:",
        "        [0:50] unchanged (50 items)",
        '      + [50] {"role": "assistant", "content": "hi"}',
    ]
    assert values[values.index("  ~ step:") : values.index("  ~ step:") + 3] == ["  ~ step:", "      - 3", "      + 4"]
    long_old = values[values.index("  ~ long:") + 1]
    assert long_old.startswith('      - "xxx') and long_old.endswith("x...") and len(long_old) == len("      - ") + 100
    stat = cli("diff", f"r@{a.id}", f"r@{b.id}", "--stat", store=root)
    assert stat.returncode == 1 and "values:" not in stat.stdout and "  ~  step " in stat.stdout
