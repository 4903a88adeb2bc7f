"""agentfs: keep an agent's state and files safe, and resume anywhere."""

from .api import Store, open_store
from .core.checkpoint import Artifact, Checkpoint
from .core.extend import Extend
from .core.run import Run
from .core.schema import Schema
from .engine.keyslots import Encryption
from .errors import (
    AgentFSError,
    Conflict,
    FormatError,
    InFlight,
    IntegrityError,
    InvalidName,
    NotFound,
    ObjectMissing,
    RemoteDataMissing,
    RemoteError,
    RetirementRefused,
    SchemaError,
    SerializationError,
    WrongKey,
)
from .serialization import register

open = open_store

__version__ = "0.1.0"  # the one version source: pyproject.toml reads it, `agentfs --version` prints it

__all__ = [
    "AgentFSError",
    "Artifact",
    "Checkpoint",
    "Conflict",
    "Encryption",
    "Extend",
    "FormatError",
    "InFlight",
    "IntegrityError",
    "InvalidName",
    "NotFound",
    "ObjectMissing",
    "RemoteDataMissing",
    "RemoteError",
    "RetirementRefused",
    "Run",
    "Schema",
    "SchemaError",
    "SerializationError",
    "Store",
    "WrongKey",
    "open",
    "register",
]
