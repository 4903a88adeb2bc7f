"""Schema versions: a run's code declares the version it writes and how to lift older states to it."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

from ..errors import SchemaError

UNVERSIONED = 1  # a checkpoint committed without a schema counts as version 1

Migration = Callable[[Any], Any]


@dataclasses.dataclass(frozen=True)
class Schema:
    """`version` is what commits record; `migrations[v]` turns a version-v state into a version-v+1 one.

    Migrations run in memory when an older checkpoint is loaded; stored bytes are never rewritten.
    """

    version: int
    migrations: Mapping[int, Migration] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        if type(self.version) is not int or self.version < 1:
            raise SchemaError(f"schema version must be an int >= 1, got {self.version!r}")
        for source, migration in self.migrations.items():
            if type(source) is not int or not 1 <= source < self.version:
                raise SchemaError(f"migration key {source!r} must be a version from 1 to {self.version - 1} (it migrates v -> v+1)")
            if not callable(migration):
                raise SchemaError(f"migration from version {source} is a {type(migration).__name__}, not a callable")

    def check(self, stored: int | None, where: str) -> int:
        """The stored version, refused with a message naming both versions if this code cannot load it."""
        version = UNVERSIONED if stored is None else stored
        if version > self.version:
            raise SchemaError(
                f"{where} was written with schema version {version}, newer than this code's version {self.version}: "
                "load it with code that knows that version"
            )
        missing = [v for v in range(version, self.version) if v not in self.migrations]
        if missing:
            raise SchemaError(f"{where} has schema version {version}: no migration from version {missing[0]} to {missing[0] + 1}")
        return version

    def migrate(self, state: Any, stored: int | None, where: str) -> Any:
        """`state` lifted from its stored version to this schema's version, one migration at a time."""
        for version in range(self.check(stored, where), self.version):
            try:
                state = self.migrations[version](state)
            except Exception as exc:
                raise SchemaError(f"{where}: migration from schema version {version} to {version + 1} failed: {exc!r}") from exc
        return state
