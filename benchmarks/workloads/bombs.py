"""Workload 14: decompression bombs. Each bomb (tests/helpers/bombs.py: 256 MiB of zeros in 8 KB, under a
forged id, under its own sha256, without a declared size; a frame header claiming 1 TiB) is decoded in a
fresh child process, which reports the peak resident memory the refusal cost over what was resident just
before (VmHWM - VmRSS from /proc/self/status). Goal: refused, at most 64 MiB over the baseline.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from ..context import Context
from .common import fig

W = "15 decompression bombs"
KINDS = ("forged", "valid", "unsized", "claims_tib")
BOUND_MIB = 64
REPOSITORY = Path(__file__).resolve().parents[2]  # the child imports tests.helpers.bombs from here


def refuse(kind: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-m", "tests.helpers.bombs", kind], capture_output=True, text=True, cwd=REPOSITORY, timeout=300, check=True
    )
    report: dict[str, object] = json.loads(done.stdout)
    return report


def run(ctx: Context) -> None:
    if ctx.agentfs is None:
        return
    for kind in KINDS:
        report = refuse(kind)
        refused = str(report["outcome"]).startswith("IntegrityError")
        peak_mib = int(str(report["peak_over_baseline"])) / (1 << 20)
        fig(
            ctx,
            W,
            f"peak RSS over baseline (MiB), {kind} ({report['blob_bytes']} bytes)",
            peak_mib,
            goal=f"refused, <= {BOUND_MIB} MiB",
            met=lambda value, refused=refused: refused and value <= BOUND_MIB,
            note=str(report["outcome"]).split(f"bomb {kind} ", 1)[-1][:90],
        )
