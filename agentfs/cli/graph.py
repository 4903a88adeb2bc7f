"""`agentfs log RUN --graph`: a run's lines of checkpoints as a small text graph, newest first."""

from __future__ import annotations

from collections.abc import Sequence, Set

import agentfs


def graph_lines(history: Sequence[agentfs.Checkpoint], heads: Set[str]) -> list[str]:
    """One row per checkpoint (newest first) with a lane per line of the run: `*` marks the checkpoint,
    `|` a line passing by, and `|/` where a line joins the one it branched from (above its parent);
    `(head)` marks the `heads` (run.heads())."""
    present = {checkpoint.id for checkpoint in history}
    lanes: list[str] = []  # per lane, the id the lane waits for next (a parent, newest first)
    rows: list[str] = []
    for checkpoint in history:
        waiting = [lane for lane, expected in enumerate(lanes) if expected == checkpoint.id]
        if not waiting:  # nothing newer names it as parent: a head
            lanes.append(checkpoint.id)
            waiting = [len(lanes) - 1]
        column = waiting[0]
        for joined in reversed(waiting[1:]):  # lines that branched from this checkpoint join here
            rows.append(" ".join("|" for _ in range(joined)) + "/")
            del lanes[joined]
        marks = "  (head)" if checkpoint.id in heads else ""
        rows.append(" ".join("*" if lane == column else "|" for lane in range(len(lanes))) + f"  {checkpoint.id}{marks}")
        parent = checkpoint.parent
        if parent is None or parent not in present:  # the root, or its parent was pruned or is damaged
            del lanes[column]
        else:
            lanes[column] = parent
    return rows
