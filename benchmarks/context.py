"""What every workload gets: sizes, the report, a scratch directory, the
machine limits, the shared data file, the moto server, and agentfs itself
(or why it cannot be imported)."""

from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import msgpack

from . import data
from .limits import Limits
from .report import Report
from .s3 import MotoServer


@dataclass(frozen=True)
class Sizes:
    floor_writes: int  # durable small-file writes for the floor
    small_commits: int  # workload 1
    conv_steps: int  # workload 2
    big_mb: int  # workloads 3, 4, 6 and the zstd/sha256/s3 limits (MiB)
    seq_write_mb: int
    lag_commits: int  # workload 5, at 10 commits/s
    push_small: int  # workload 6 and the s3fs small-put limit
    resume_small: int  # workload 7
    resume_large: int
    scale_objects: int  # workload 8
    scale_commits: int
    langgraph_steps: int  # workload 9
    history_short: int  # workload 12: commit on a run of this many checkpoints ...
    history_long: int  # ... next to one of this many
    open_short: int  # workload 12: open + latest() in a fresh process at this many checkpoints ...
    open_long: int  # ... next to this many
    open_rounds: int  # fresh processes per store, alternated
    daemon_checkpoints: int  # workload 13: the store the daemon syncs ...
    daemon_runs: int  # ... in this many runs
    daemon_phase_commits: int  # paced commits per phase (10/s), with and without the daemon
    daemon_rounds: int  # phases of each kind, alternated
    flush_timeout: float  # seconds a sync flush may take before it is reported as missed
    resume_flush_timeout: float  # the same for pushing the long history of workload 7
    agent_langgraph_turns: int  # workload 18: LangGraph tool-calling turns (invoke, 4 checkpoints each)
    agent_openai_turns: int  # workload 18: OpenAI Agents session turns of 4 items


FULL = Sizes(
    floor_writes=500,
    small_commits=500,
    conv_steps=1000,
    big_mb=256,
    seq_write_mb=256,
    lag_commits=100,
    push_small=1000,
    resume_small=10,
    resume_large=10_000,
    scale_objects=100_000,
    scale_commits=100,
    langgraph_steps=1000,
    history_short=100,
    history_long=10_000,
    open_short=1_000,
    open_long=100_000,
    open_rounds=5,
    daemon_checkpoints=10_000,
    daemon_runs=1_000,
    daemon_phase_commits=100,
    daemon_rounds=3,
    flush_timeout=120.0,
    resume_flush_timeout=360.0,
    agent_langgraph_turns=300,
    agent_openai_turns=1000,
)
QUICK = Sizes(
    floor_writes=100,
    small_commits=60,
    conv_steps=150,
    big_mb=16,
    seq_write_mb=32,
    lag_commits=20,
    push_small=100,
    resume_small=10,
    resume_large=200,
    scale_objects=2_000,
    scale_commits=30,
    langgraph_steps=100,
    history_short=100,
    history_long=1_000,
    open_short=100,
    open_long=10_000,
    open_rounds=3,
    daemon_checkpoints=1_000,
    daemon_runs=100,
    daemon_phase_commits=30,
    daemon_rounds=2,
    flush_timeout=30.0,
    resume_flush_timeout=60.0,
    agent_langgraph_turns=40,
    agent_openai_turns=250,
)


def load_agentfs() -> tuple[ModuleType | None, str]:
    """Our agentfs package, or None and the reason it cannot be used."""
    try:
        import agentfs
    except Exception as exc:
        return None, f"import agentfs failed: {type(exc).__name__}: {exc}"
    if not hasattr(agentfs, "open"):
        # PyPI's unrelated "agentfs" 0.1.0 would import too: it has no open().
        return None, f"'agentfs' at {getattr(agentfs, '__file__', '?')} has no open()"
    return agentfs, ""


class Context:
    def __init__(self, sizes: Sizes, report: Report, workdir: Path, quick: bool) -> None:
        self.sizes = sizes
        self.report = report
        self.workdir = workdir
        self.quick = quick
        self.agentfs, self.agentfs_error = load_agentfs()
        self.limits = Limits(self)
        self._moto: MotoServer | None = None
        self._big: Path | None = None
        self._small_states: list[dict[str, Any]] | None = None
        self._dirs: list[Path] = []
        self.sync_broken = ""  # set by the first failed sync flush: later sync figures are skipped

    def new_dir(self, name: str) -> Path:
        """A fresh, empty directory under the run's scratch directory."""
        d = self.workdir / f"{len(self._dirs) + 1:03d}-{name}"
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
        self._dirs.append(d)
        return d

    def clean(self) -> None:
        """Remove the directories made by ``new_dir`` so far (between workloads)."""
        for d in self._dirs:
            shutil.rmtree(d, ignore_errors=True)

    def moto(self) -> MotoServer:
        if self._moto is None:
            self._moto = MotoServer()
        return self._moto

    def big_file(self) -> Path:
        """The run's mixed-data file (half random, half text), made once."""
        if self._big is None:
            path = self.workdir / "mixed.bin"
            t = time.perf_counter()
            data.write_mixed_file(path, self.sizes.big_mb * data.MIB)
            print(f"  (made {self.sizes.big_mb} MiB of mixed data in {time.perf_counter() - t:.1f} s)", flush=True)
            self._big = path
        return self._big

    def small_states(self) -> list[dict[str, Any]]:
        """The ``push_small`` checkpoints of about 4 KB of state each."""
        if self._small_states is None:
            self._small_states = data.states(self.sizes.push_small, 4_000, seed=4)
        return self._small_states

    def small_checkpoint_payloads(self) -> list[bytes]:
        """Those checkpoints as msgpack bytes: what one-object-per-checkpoint uploads."""
        return [msgpack.packb(s) for s in self.small_states()]

    def close(self) -> None:
        if self._moto is not None:
            self._moto.close()
            self._moto = None
