"""agentfs: keep an agent's state and files safe, and resume anywhere."""

from .errors import (
    AgentFSError,
    Conflict,
    FormatError,
    IntegrityError,
    InvalidName,
    NotFound,
    ObjectMissing,
    RemoteError,
    SerializationError,
)
from .serialization import register
from .store.checkpoint import Artifact, Checkpoint
from .store.run import Run
from .store.store import Store, open_store

open = open_store

__all__ = [
    "AgentFSError",
    "Artifact",
    "Checkpoint",
    "Conflict",
    "FormatError",
    "IntegrityError",
    "InvalidName",
    "NotFound",
    "ObjectMissing",
    "RemoteError",
    "Run",
    "SerializationError",
    "Store",
    "open",
    "register",
]
