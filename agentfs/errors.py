"""One hierarchy: every error is an AgentFSError and also the builtin a caller would expect."""

from __future__ import annotations


class AgentFSError(Exception):
    """Base of every error agentfs raises on purpose."""


class NotFound(AgentFSError, KeyError):
    """A run, checkpoint, artifact or object that does not exist."""

    def __str__(self) -> str:  # KeyError would quote the message as a repr
        return str(self.args[0]) if self.args else ""


class ObjectMissing(NotFound):
    """An object a checkpoint needs that neither the store nor its remote holds: damage, not a bad name."""


class InvalidName(AgentFSError, ValueError):
    """A run or artifact name that could escape the store or is not portable."""


class SerializationError(AgentFSError, TypeError):
    """A value that cannot be stored; the message names its path inside the state."""


class IntegrityError(AgentFSError, ValueError):
    """Stored bytes whose hash does not match their name: never returned to the caller."""


class FormatError(AgentFSError, ValueError):
    """A malformed record: a config, log entry, manifest or object header."""


class Conflict(AgentFSError, RuntimeError):
    """`commit(parent=...)` found that the head of the run had moved."""


class InFlight(Conflict):
    """A journaled call that started and never recorded an end: it may or may not have happened."""


class SchemaError(AgentFSError, ValueError):
    """A checkpoint whose schema version this code cannot load (newer, or no migration path)."""


class RemoteError(AgentFSError, OSError):
    """A remote operation that failed after its retries."""


class MissingExtra(AgentFSError, ImportError):
    """A feature whose optional dependencies are not installed: the message names the `pip install` line to run."""
