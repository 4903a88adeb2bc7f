"""Figures, the printed table, and the results files (JSON and Markdown)."""

from __future__ import annotations

import datetime as _dt
import json
import os
import platform
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

NOT_AVAILABLE = "not available"


@dataclass
class Figure:
    """One measured figure, next to what it is compared with.

    ``agentfs`` is ``None`` when agentfs could not run this figure (then the
    row shows "agentfs: not available"). ``ratio`` is always agentfs / peer.
    ``goal_met`` is ``None`` for an informational row without a goal. A machine
    limit (``is_limit``) has no agentfs value: its number is ``peer_value``.
    """

    workload: str
    metric: str
    agentfs: float | None
    peer: str = ""
    peer_value: float | None = None
    goal: str = ""
    goal_met: bool | None = None
    note: str = ""
    ratio: float | None = field(default=None)
    is_limit: bool = False
    agentfs_status: str = NOT_AVAILABLE

    def __post_init__(self) -> None:
        if self.ratio is None and self.agentfs is not None and self.peer_value:
            self.ratio = self.agentfs / self.peer_value

    def mark(self) -> str:
        if self.goal_met is None:
            return "n/a" if self.goal and self.agentfs is None else "-"
        return "ok" if self.goal_met else "MISSED"


def fmt(value: float | None, missing: str = "") -> str:
    if value is None:
        return missing
    if value == 0:
        return "0"
    mag = abs(value)
    if mag >= 1000:
        return f"{value:,.0f}"
    if mag >= 100:
        return f"{value:.0f}"
    if mag >= 10:
        return f"{value:.1f}"
    if mag >= 0.01:
        return f"{value:.3g}"
    return f"{value:.2e}"


HEADERS = ["workload", "metric", "agentfs", "compared with", "its value", "ratio", "goal", "", "note"]


def _cells(f: Figure) -> list[str]:
    return [
        f.workload,
        f.metric,
        "" if f.is_limit else fmt(f.agentfs, "agentfs: " + f.agentfs_status),
        f.peer,
        fmt(f.peer_value),
        fmt(f.ratio) + ("x" if f.ratio is not None else ""),
        f.goal,
        f.mark(),
        f.note,
    ]


def machine_info(workdir: Path) -> dict[str, str]:
    """Cores, disk (from df), memory, Python: what the table was measured on."""
    try:
        df = subprocess.run(["df", "-hT", str(workdir)], capture_output=True, text=True, check=True).stdout.splitlines()[-1].split()
        disk = f"{df[0]} ({df[1]}, {df[2]} total, {df[4]} free)"
    except (OSError, subprocess.CalledProcessError, IndexError):
        disk = "unknown"
    mem = "unknown"
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem = f"{int(line.split()[1]) / 1024 / 1024:.0f} GiB"
    except OSError:
        pass
    return {
        "cores": str(os.cpu_count()),
        "memory": mem,
        "disk": disk,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu": platform.processor() or platform.machine(),
    }


class Report:
    """Collects figures; prints them as they come and as one table at the end."""

    def __init__(self, command: str, workdir: Path) -> None:
        self.figures: list[Figure] = []
        self.notes: list[str] = []
        self.command = command
        self.workdir = workdir
        self.started = _dt.datetime.now(_dt.timezone.utc)
        self.machine = machine_info(workdir)

    def add(self, figure: Figure) -> Figure:
        self.figures.append(figure)
        c = _cells(figure)
        if figure.is_limit:
            print(f"  {c[1]}: {c[4]}", flush=True)
            return figure
        peer = f"  vs {c[3]} {c[4]}  ratio {c[5]}" if figure.peer else ""
        goal = f"  [{figure.goal}: {c[7]}]" if figure.goal else ""
        print(f"  {c[1]}: {c[2]}{peer}{goal}", flush=True)
        return figure

    def note(self, text: str) -> None:
        self.notes.append(text)
        print(f"  note: {text}", flush=True)

    def table(self) -> str:
        rows = [HEADERS] + [_cells(f) for f in self.figures]
        widths = [max(len(r[i]) for r in rows) for i in range(len(HEADERS))]
        lines = []
        for n, row in enumerate(rows):
            lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=False)).rstrip())
            if n == 0:
                lines.append("  ".join("-" * w for w in widths))
        return "\n".join(lines)

    def markdown(self) -> str:
        info = self.machine
        out = [
            f"Measured {self.started:%Y-%m-%d %H:%M} UTC on {info['cores']} cores, "
            f"{info['memory']} memory, disk {info['disk']}, Python {info['python']} "
            f"({info['platform']}).",
            "",
            f"Reproduce: `{self.command}`",
            "",
            "Ratios are agentfs / the compared value, from the same run. MISSED marks a goal that is not met.",
            "",
            "| " + " | ".join(h or "met" for h in HEADERS) + " |",
            "|" + "---|" * len(HEADERS),
        ]
        for f in self.figures:
            cells = [c.replace("|", "\\|") for c in _cells(f)]
            if f.goal_met is False:
                cells[-2] = "**MISSED**"
            out.append("| " + " | ".join(cells) + " |")
        if self.notes:
            out += ["", "Notes:", ""] + [f"- {n}" for n in self.notes]
        return "\n".join(out) + "\n"

    def write(self, results_dir: Path, elapsed_s: float) -> tuple[Path, Path]:
        results_dir.mkdir(parents=True, exist_ok=True)
        data = {
            "date": self.started.isoformat(timespec="seconds"),
            "command": self.command,
            "elapsed_s": round(elapsed_s, 1),
            "machine": self.machine,
            "argv": sys.argv,
            "figures": [asdict(f) for f in self.figures],
            "notes": self.notes,
        }
        jpath = results_dir / "latest.json"
        mpath = results_dir / "latest.md"
        jpath.write_text(json.dumps(data, indent=2) + "\n")
        mpath.write_text(self.markdown())
        return jpath, mpath
