"""How a value or an artifact from the store is shown: every text goes through the templates' autoescape, Markdown
through markdown-it-py with raw HTML off and then nh3 (ammonia), so nothing from the store becomes markup that runs.

markdown-it-py (CommonMark, html=False) turns `<script>` into text and refuses `javascript:` links; nh3, a
binding of the Rust sanitiser ammonia, then keeps only an allow-list of tags and attributes, so a bug in either
alone does not let script through (tests/ui/test_ui_safety.py::test_markdown_is_rendered_and_sanitised).
"""

from __future__ import annotations

import csv
import io
import json
from dataclasses import dataclass, field
from typing import Any

import nh3
from markdown_it import MarkdownIt
from markupsafe import Markup

import agentfs

PREVIEW_BYTES = 256 << 10  # bytes of an artifact read for its preview
HEX_HEAD = 256
CSV_ROWS = 200
INLINE_VALUE = 2000  # characters of JSON shown in a tree without a click
IMAGE_TYPES = {b"\x89PNG\r\n\x1a\n": "image/png", b"\xff\xd8\xff": "image/jpeg", b"GIF87a": "image/gif", b"GIF89a": "image/gif"}
TEXT_SUFFIXES = (".txt", ".log", ".py", ".yaml", ".yml", ".toml", ".ini", ".xml", ".js", ".css", ".sh")
MARKUP_SUFFIXES = (".html", ".htm", ".svg", ".xhtml")


def jsonable(value: Any) -> Any:
    """`value` as JSON types: keys as text, tuples as lists, bytes as their size, anything else as its repr."""
    if isinstance(value, dict):
        return {key if isinstance(key, str) else repr(key): jsonable(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(item) for item in value]
    if isinstance(value, (bytes, bytearray, memoryview)):
        return f"<{len(value)} bytes>"
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return repr(value)


_markdown = MarkdownIt("commonmark", {"html": False}).enable("table")


def render_markdown(text: str) -> Markup:
    html = _markdown.render(text)
    return Markup(nh3.clean(html, url_schemes={"http", "https", "mailto"}, link_rel="noopener noreferrer nofollow"))


def image_type(head: bytes) -> str | None:
    """The raster image type of bytes by their magic number (never SVG: an SVG is markup that can hold script)."""
    for magic, kind in IMAGE_TYPES.items():
        if head.startswith(magic):
            return kind
    return "image/webp" if head[:4] == b"RIFF" and head[8:12] == b"WEBP" else None


@dataclass
class ArtifactPreview:
    name: str
    size: int
    kind: str  # image, markdown, json, csv, markup, text, binary
    text: str = ""
    html: Markup | None = None
    rows: list[list[str]] = field(default_factory=list)
    hex_lines: list[str] = field(default_factory=list)
    truncated: bool = False


def preview_artifact(artifact: agentfs.Artifact) -> ArtifactPreview:
    name, size = artifact.name, artifact.size
    with artifact.open() as stream:
        head = stream.read(PREVIEW_BYTES)
    truncated = size > len(head)
    if image_type(head) is not None:
        return ArtifactPreview(name, size, "image")
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError as exc:
        if not (truncated and exc.start >= len(head) - 4):  # a multi-byte character cut by the preview's end
            return ArtifactPreview(name, size, "binary", hex_lines=_hex(head[:HEX_HEAD]), truncated=size > HEX_HEAD)
        text = head[: exc.start].decode("utf-8")
    lower = name.lower()
    if lower.endswith((".md", ".markdown")):
        return ArtifactPreview(name, size, "markdown", text=text, html=render_markdown(text), truncated=truncated)
    if lower.endswith(".json") and not truncated:
        try:
            return ArtifactPreview(name, size, "json", text=json.dumps(json.loads(text), indent=2, ensure_ascii=False))
        except ValueError:
            pass
    if lower.endswith((".csv", ".tsv")):
        reader = csv.reader(io.StringIO(text), delimiter="\t" if lower.endswith(".tsv") else ",")
        rows = [row for _, row in zip(range(CSV_ROWS), reader, strict=False)]
        return ArtifactPreview(name, size, "csv", rows=rows, truncated=truncated or len(rows) == CSV_ROWS)
    kind = "markup" if lower.endswith(MARKUP_SUFFIXES) else "text"
    return ArtifactPreview(name, size, kind, text=text, truncated=truncated)


def _hex(data: bytes) -> list[str]:
    lines = []
    for offset in range(0, len(data), 16):
        row = data[offset : offset + 16]
        printable = "".join(chr(byte) if 32 <= byte < 127 else "." for byte in row)
        lines.append(f"{offset:08x}  {row.hex(' '):<47}  {printable}")
    return lines


@dataclass
class Node:
    """One entry of a state tree: a scalar shown whole, a container with children, or a large value loaded on opening."""

    label: str
    summary: str
    path: list[str | int]
    children: list[Node] | None = None
    lazy: bool = False
    text: str | None = None


def value_json(value: Any) -> str:
    return json.dumps(jsonable(value), ensure_ascii=False, default=repr, indent=1)


def tree(value: Any, label: str, path: list[str | int], depth: int = 0) -> Node:
    """`value` as nodes; below the first level a container whose JSON is long is left to load when opened."""
    plain = jsonable(value)
    if isinstance(plain, (dict, list)):
        items = list(plain.items()) if isinstance(plain, dict) else list(enumerate(plain))
        summary = f"{{{len(items)} keys}}" if isinstance(plain, dict) else f"[{len(items)} items]"
        if depth >= 1 and len(json.dumps(plain, default=repr)) > INLINE_VALUE:
            return Node(label, summary, path, lazy=True)
        return Node(label, summary, path, children=[tree(item, str(key), [*path, key], depth + 1) for key, item in items])
    text = json.dumps(plain, ensure_ascii=False, default=repr)
    if len(text) > INLINE_VALUE:
        return Node(label, f"{len(text)} characters", path, lazy=True)
    return Node(label, text, path, text=text)


def at_path(value: Any, path: list[str]) -> Any:
    """The part of a JSON-like value that `path` (keys, or list indexes as text) names."""
    current = jsonable(value)
    for step in path:
        if isinstance(current, dict) and step in current:
            current = current[step]
        elif isinstance(current, list) and step.isdigit() and int(step) < len(current):
            current = current[int(step)]
        else:
            raise agentfs.NotFound(f"no value at {'/'.join(path)!r} in the state")
    return current
