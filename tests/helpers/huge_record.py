"""Open a store and read one checkpoint's state in this fresh process; print what happened and the peak
memory it cost as JSON (bombs.peak_after): {"outcome", "peak_over_baseline"}.

    python -m tests.helpers.huge_record STORE RUN CHECKPOINT_ID
"""

from __future__ import annotations

import sys

import agentfs
from tests.helpers.bombs import peak_after


def read_state(root: str, run: str, checkpoint_id: str) -> str:
    with agentfs.open(root, create=False) as store:
        return repr(store.run(run).get(checkpoint_id).state)


if __name__ == "__main__":
    print(peak_after(lambda: read_state(*sys.argv[1:4])))
