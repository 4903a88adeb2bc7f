"""The workloads of issue 5 (and 12-13 for issue 10), in the order they run. Each is a function of the
run's ``Context``; the agentfs side of each is guarded so that the peers and
the limits run even when agentfs cannot."""

from __future__ import annotations

from collections.abc import Callable

from .. import limits
from ..context import Context
from . import (
    agent_turns,
    bombs,
    conversation,
    daemon_load,
    encryption,
    frameworks,
    history,
    incremental_artifact,
    journal,
    langgraph_savers,
    langgraph_store,
    large_artifact,
    push,
    resume,
    scale,
    small_commit,
    sync_lag,
    ui_pages,
)

WORKLOADS: dict[str, Callable[[Context], None]] = {
    "limits": limits.report,
    "small_commit": small_commit.run,
    "conversation": conversation.run,
    "large_artifact": large_artifact.run,
    "incremental_artifact": incremental_artifact.run,
    "sync_lag": sync_lag.run,
    "push": push.run,
    "resume": resume.run,
    "scale": scale.run,
    "langgraph_savers": langgraph_savers.run,
    "journal": journal.run,
    "langgraph_store": langgraph_store.run,
    "history": history.run,
    "bombs": bombs.run,
    "daemon_load": daemon_load.run,
    "encryption": encryption.run,
    "frameworks": frameworks.run,
    "ui_pages": ui_pages.run,
    "agent_turns": agent_turns.run,
}
