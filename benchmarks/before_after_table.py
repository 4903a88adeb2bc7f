"""The before/after table (benchmarks/results/before-after.md, shown in docs/benchmarks.md): the goal rows of two full runs side by side.

    python -m benchmarks.before_after_table benchmarks/results/format1.json benchmarks/results/latest.json

Each row is a figure with a goal (ok/MISSED) in either run, matched by workload, metric and peer;
a row only one run has shows a blank on the other side. Ratios come from each run alone (agentfs
next to its peer in that run), so the two columns compare like with like on the same machine.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from .report import fmt

Key = tuple[str, str, str]


def goal_rows(path: Path) -> dict[Key, dict[str, Any]]:
    figures = json.loads(path.read_text())["figures"]
    return {(f["workload"], f["metric"], f["peer"]): f for f in figures if f.get("goal") and f.get("goal_met") is not None}


def cell(figure: dict[str, Any] | None) -> str:
    if figure is None:
        return ""
    mark = "ok" if figure["goal_met"] else "**MISSED**"
    ratio = "" if figure.get("ratio") is None else f" ({fmt(figure['ratio'])}x)"
    return f"{fmt(figure['agentfs'])}{ratio} {mark}"


def table(before: Path, after: Path) -> str:
    old, new = goal_rows(before), goal_rows(after)
    lines = ["| workload | metric | compared with | goal | before (format 1) | after (format 2) |", "|---|---|---|---|---|---|"]
    for key in sorted(old.keys() | new.keys(), key=lambda k: (int(k[0].split()[0]) if k[0].split()[0].isdigit() else 0, k)):
        workload, metric, peer = key
        goal = (new.get(key) or old[key])["goal"]
        lines.append(f"| {workload} | {metric} | {peer} | {goal} | {cell(old.get(key))} | {cell(new.get(key))} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("before", type=Path)
    parser.add_argument("after", type=Path)
    args = parser.parse_args()
    print(table(args.before, args.after))


if __name__ == "__main__":
    main()
