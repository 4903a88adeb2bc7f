"""`agentfs upgrade STORE`, SIGKILLed at one point of its work (for tests/format/test_upgrade_from_format1.py).

    python upgrade_killer.py POINT STORE

POINT: `batch` (after the second batch is appended), `remotes` (remotes/ dropped, the config not yet
rewritten), `config` (just after the config was replaced: the commit point), `removal` (after
objects/ was removed, before runs/). The wrappers are patched into the process here; production code
has no hook.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentfs.cli.main import main
from agentfs.engine import upgrade
from agentfs.engine.segment_writer import SegmentWriter


def _die() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


def _after_calls(function: Callable[..., Any], count: int, when: Callable[..., bool] = lambda *a, **k: True) -> Callable[..., Any]:
    calls = 0

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        result = function(*args, **kwargs)
        if when(*args, **kwargs):
            calls += 1
            if calls == count:
                _die()
        return result

    return wrapper


def plant(point: str) -> None:
    if point == "batch":
        upgrade.BATCH_BYTES = 64 << 10  # several batches from the test store
        SegmentWriter.append = _after_calls(SegmentWriter.append, 2)  # type: ignore[method-assign]
    elif point == "remotes":
        upgrade.write_atomic = lambda *args, **kwargs: _die()  # type: ignore[assignment]
    elif point == "config":
        upgrade.write_atomic = _after_calls(upgrade.write_atomic, 1)
    elif point == "removal":
        shutil.rmtree = _after_calls(shutil.rmtree, 1, lambda path, *a, **k: Path(path).name == "objects")  # type: ignore[assignment]
    else:
        raise SystemExit(f"unknown kill point {point!r}")


if __name__ == "__main__":
    plant(sys.argv[1])
    main(["upgrade", sys.argv[2]])
    raise SystemExit(f"kill point {sys.argv[1]!r} was never reached")
