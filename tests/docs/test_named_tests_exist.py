"""Every test path the code and the docs name exists: a comment that names the test proving a hazard, a doc
page that points at a feature's tests, a Makefile target that runs a file.

Scanned: agentfs/, docs/, benchmarks/, tests/ (its committed stores aside), .ci/, the Makefile, pyproject.toml,
mkdocs.yml, README.md, CONTRIBUTING.md and CHANGELOG.md. A path under tests/ must exist (a file or a
directory; a glob must match something), and a node id (`path.py::test_name`, `path.py::Class::test_name`)
must name a function or class that file defines, so a test moved, renamed or deleted (or a merge that brings
back an old path) fails here instead of leaving a pointer to nothing.
"""

from __future__ import annotations

import ast
import re
from functools import cache
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
SCANNED = ["agentfs", "docs", "benchmarks", "tests", ".ci", "Makefile", "pyproject.toml", "mkdocs.yml"]
SCANNED += ["README.md", "CONTRIBUTING.md", "CHANGELOG.md"]
NOT_SCANNED = ["tests/vectors/format2/store", "tests/vectors/format2/remote", "tests/data/langgraph_layout1"]  # stores
TEXT_SUFFIXES = {"", ".py", ".md", ".toml", ".yml", ".yaml", ".txt", ".html", ".cfg", ".ini", ".sh", ".js", ".css"}

# a path under tests/ (not tests_upstream/ or someone's other/tests/), then an optional node id whose parts may
# continue on the next line of a comment or docstring
MENTION = re.compile(
    r"(?<![\w/.-])(?P<node>tests/[\w/.-]+?\.py)::(?:\s*\n\s*(?:#\s*)?)?(?P<parts>\w+(?:::\w+)*)"
    r"|(?<![\w/.-])(?P<path>tests/[\w./*-]*?)(?=[.,;:)]*(?:\s|$|[`'\"\]|]))"
)


def scanned_files() -> list[Path]:
    found: list[Path] = []
    for name in SCANNED:
        top = REPO / name
        candidates = [top] if top.is_file() else sorted(p for p in top.rglob("*") if p.is_file())
        for path in candidates:
            relative = path.relative_to(REPO).as_posix()
            if any(relative.startswith(prefix + "/") for prefix in NOT_SCANNED) or "__pycache__" in relative:
                continue
            if path.suffix in TEXT_SUFFIXES:
                found.append(path)
    return found


@cache
def defined_names(path: Path) -> dict[str, set[str]]:
    """Top-level function and class names of a test file, each class with the names defined in it."""
    tree = ast.parse(path.read_text(), filename=str(path))
    names: dict[str, set[str]] = {}
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names[node.name] = set()
        elif isinstance(node, ast.ClassDef):
            names[node.name] = {n.name for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    return names


def problem(path_text: str, parts: list[str]) -> str | None:
    """Why a mention of `path_text` (and the node id `parts` in it) names nothing; None when it names something."""
    if "*" in path_text:
        return None if list(REPO.glob(path_text)) else "no file matches"
    target = REPO / path_text
    if not target.exists():
        return "no such file or directory"
    if not parts:
        return None
    names = defined_names(target)
    if parts[0] not in names:
        return f"{parts[0]} is not defined in it"
    if len(parts) > 1 and parts[1] not in names[parts[0]]:
        return f"{parts[1]} is not defined in {parts[0]}"
    return None


def stale_mentions(paths: list[Path]) -> list[str]:
    stale = []
    for path in paths:
        try:
            text = path.read_text()
        except UnicodeDecodeError:
            continue
        for match in MENTION.finditer(text):
            if match.group("node"):
                path_text, parts = match.group("node"), match.group("parts").split("::")
            else:
                path_text, parts = match.group("path").rstrip("."), []
            why = problem(path_text, parts)
            if why:
                line = text.count("\n", 0, match.start()) + 1
                mention = path_text + "".join("::" + part for part in parts)
                where = path.relative_to(REPO) if path.is_relative_to(REPO) else path
                stale.append(f"{where}:{line}: {mention}: {why}")
    return stale


def test_every_named_test_path_and_node_id_exists() -> None:
    files = scanned_files()
    assert len(files) > 100, "the scan found the repository's files"
    stale = stale_mentions(files)
    assert not stale, "test paths named but missing:\n" + "\n".join(stale)


def test_a_stale_path_and_a_stale_node_id_are_found(tmp_path: Path) -> None:
    """The scan itself: a moved file, a renamed test and a node id continued on the next line are each caught."""
    this = Path(__file__).relative_to(REPO).as_posix()
    gone = "tests/" + "test_gone.py"  # spelled in two parts, so the scan of this file does not find it
    page = tmp_path / "page.md"
    page.write_text(
        f"moved: {gone}. renamed: `{this}::test_gone`.\n"
        f"# continued ({this}::\n# test_every_named_test_path_and_node_id_exists). fine: {this}, tests/helpers/.\n"
    )
    stale = [line.split(": ", 1)[1] for line in stale_mentions([page])]
    assert stale == [f"{gone}: no such file or directory", f"{this}::test_gone: test_gone is not defined in it"]
