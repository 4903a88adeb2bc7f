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


class WrongKey(AgentFSError, PermissionError):
    """An encrypted store or remote that the passphrase or key file given does not unlock (or none was given)."""


class StorageError(AgentFSError, OSError):
    """A local file operation that failed (disk full, an I/O error): the message names the operation and the path."""

    def __str__(self) -> str:  # OSError would prefix "[Errno N]" to a message that says it in words
        return str(self.args[1]) if len(self.args) > 1 else super().__str__()


class StoreClosed(AgentFSError, RuntimeError):
    """A store used after (or while) it was closed."""


class RetirementRefused(AgentFSError, ValueError):
    """A retirement record from a remote that names what that remote may not retire here (docs/FORMAT.md)."""


class RemoteDataMissing(ObjectMissing):
    """A checkpoint a remote's head key or pack index names whose bytes the remote no longer holds."""


class MissingExtra(AgentFSError, ImportError):
    """A feature whose optional dependencies are not installed: the message names the `pip install` line to run."""
