"""Optional dependencies: a feature whose extra is not installed says which `pip install` line to run."""

from __future__ import annotations

import contextlib
import importlib.metadata
import json
import urllib.parse
from collections.abc import Iterator

from .errors import MissingExtra

# extra -> the top-level modules it installs that agentfs imports (a missing one means the extra is missing)
EXTRA_MODULES: dict[str, frozenset[str]] = {
    "langgraph": frozenset({"langgraph", "langchain_core", "numpy", "ormsgpack"}),
    "mcp": frozenset({"mcp", "pydantic", "anyio", "uvicorn", "starlette"}),
    "openai-agents": frozenset({"agents", "openai"}),
    "ui": frozenset({"starlette", "uvicorn", "jinja2", "markupsafe", "markdown_it", "nh3", "langgraph", "langchain_core"}),
    "gcs": frozenset({"gcsfs"}),
    "s3": frozenset({"s3fs"}),
}
PROTOCOL_EXTRAS = {"gs": "gcs", "gcs": "gcs", "s3": "s3", "s3a": "s3"}  # fsspec protocols whose filesystem an extra installs


def requirement(extra: str) -> str:
    """What to give pip for agentfs with `extra`: the clone this agentfs was installed from, if it was (agentfs-store is
    not on PyPI yet, so `agentfs-store[extra]` would fail), else the distribution's name."""
    # every installed copy's metadata (a build's egg-info in the working directory shows up too): the one pip recorded
    recorded = (dist.read_text("direct_url.json") for dist in importlib.metadata.distributions(name="agentfs-store"))
    try:
        origin = json.loads(next((text for text in recorded if text), "{}"))
    except ValueError:
        origin = {}
    url = origin.get("url", "") if isinstance(origin, dict) else ""
    if url.startswith("file://") and "dir_info" in origin:
        editable = "-e " if origin["dir_info"].get("editable") else ""
        return f"{editable}'{urllib.parse.unquote(urllib.parse.urlsplit(url).path)}[{extra}]'"
    return f"'agentfs-store[{extra}]'"


def install_line(extra: str, *, upgrade: bool = False) -> str:
    return f"pip install {'--upgrade ' if upgrade else ''}{requirement(extra)}"


@contextlib.contextmanager
def needs_extra(extra: str, feature: str) -> Iterator[None]:
    """Around the imports of `feature`: a module of `extra` that is missing (or too old to have what agentfs
    imports from it) raises MissingExtra with the line to run."""
    try:
        yield
    except MissingExtra:
        raise  # a nested feature's own line already names the extra to install
    except ImportError as exc:
        module = (exc.name or "").partition(".")[0]
        if module not in EXTRA_MODULES[extra]:
            raise
        if isinstance(exc, ModuleNotFoundError):
            message = f"{feature} needs {module}, which is not installed: {install_line(extra)}"
        else:
            message = f"{feature} cannot use the installed {module} ({exc}): {install_line(extra, upgrade=True)}"
        raise MissingExtra(message, name=exc.name) from None


@contextlib.contextmanager
def needs_protocol(url: str, where: str) -> Iterator[None]:
    """Around opening an fsspec URL: fsspec's ImportError for a filesystem an extra installs becomes MissingExtra."""
    try:
        yield
    except ImportError:
        extra = PROTOCOL_EXTRAS.get(urllib.parse.urlsplit(url).scheme)
        if extra is None:
            raise
        modules = ", ".join(sorted(EXTRA_MODULES[extra]))
        raise MissingExtra(f"{where} needs {modules}, which is not installed: {install_line(extra)}") from None
