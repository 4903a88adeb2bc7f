"""The README's install section and quick start, run verbatim from a fresh clone (`make readme-check`, part of `make test`).

Clones the repository's committed HEAD into a temporary directory (as a newcomer gets it), runs the
`sh` block of README.md's "## Install" section there with bash (-e: the first failing line fails the
check), then runs the "## Quick start" Python block with the Python that install made, in an empty
directory. pip reaches the package index as a newcomer's would; its cache makes a rerun quick.

    python -m tests.readme_install [REPO]
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


class ReadmeCheckFailed(Exception):
    """A README block that did not run as written: names the section and the output."""


def fenced_block(readme: str, section: str, language: str) -> str:
    """The first ```language block under the `## section` heading (before the next `## ` heading)."""
    start = readme.find(f"\n## {section}\n")
    if start < 0:
        raise ReadmeCheckFailed(f"README.md has no '## {section}' section")
    end = readme.find("\n## ", start + 1)
    body = readme[start : end if end >= 0 else len(readme)]
    opening = f"```{language}\n"
    if opening not in body:
        raise ReadmeCheckFailed(f"README.md's '## {section}' section has no ```{language} block")
    code = body[body.index(opening) + len(opening) :]
    return code[: code.index("```")]


def run(command: list[str], cwd: Path, what: str) -> None:
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False, timeout=900)
    if done.returncode != 0:
        raise ReadmeCheckFailed(f"{what} failed (exit {done.returncode}):\n{done.stdout}{done.stderr}")
    print(done.stdout, end="")


def check(repo: Path) -> None:
    with tempfile.TemporaryDirectory(prefix="agentfs-readme-") as scratch:
        clone = Path(scratch) / "agentfs"
        run(["git", "clone", "--quiet", str(repo), str(clone)], Path(scratch), "git clone")
        readme = (clone / "README.md").read_text()
        install = fenced_block(readme, "Install", "sh")
        run(["bash", "-euo", "pipefail", "-c", install], clone, "the README's install section")
        quick_start = Path(scratch) / "quick_start"
        quick_start.mkdir()
        (quick_start / "quick_start.py").write_text(fenced_block(readme, "Quick start", "python"))
        run([str(clone / ".venv" / "bin" / "python"), "quick_start.py"], quick_start, "the README's quick start")


def main() -> int:
    repo = Path(sys.argv[1]) if len(sys.argv) > 1 else REPO
    began = time.monotonic()
    try:
        check(repo)
    except ReadmeCheckFailed as failure:
        print(f"readme-check: {failure}", file=sys.stderr)
        return 1
    print(f"readme-check: the install section and the quick start ran verbatim in a fresh clone ({time.monotonic() - began:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
