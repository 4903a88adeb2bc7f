"""What changed inside one state value, a short line per change: `agentfs diff` and the review page's diff."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def value_changes(a: Any, b: Any, preview: Callable[[Any], str], label: Callable[[Any], str], items: Callable[[int], str]) -> list[str]:
    """`- old` / `+ new` lines: per item after the common prefix of two lists, per key for two dicts, else the
    whole values. `preview` shows a value, `label` a dict key (as `[...]`), `items` a count of unchanged items."""
    if type(a) is list and type(b) is list:
        kept = 0
        while kept < min(len(a), len(b)) and same(a[kept], b[kept]):
            kept += 1
        lines = [f"  [0:{kept}] unchanged ({items(kept)})"] if kept else []
        lines += [f"- [{index}] {preview(item)}" for index, item in enumerate(a[kept:], kept)]
        return lines + [f"+ [{index}] {preview(item)}" for index, item in enumerate(b[kept:], kept)]
    if type(a) is dict and type(b) is dict:
        lines = []
        for key in [*a, *(key for key in b if key not in a)]:
            if key in a and (key not in b or not same(a[key], b[key])):
                lines.append(f"- {label(key)} {preview(a[key])}")
            if key in b and (key not in a or not same(a[key], b[key])):
                lines.append(f"+ {label(key)} {preview(b[key])}")
        return lines
    return [f"- {preview(a)}", f"+ {preview(b)}"]


def same(x: Any, y: Any) -> bool:
    """Equal values of one type; numpy arrays (which compare element-wise) by their repr."""
    try:
        return type(x) is type(y) and bool(x == y)
    except (TypeError, ValueError):
        return repr(x) == repr(y)
