"""AgentFSArtifactService: Google ADK's `BaseArtifactService` over agentfs runs (see layout.py).

Each artifact is a run and each saved version one durable checkpoint of it: the part's bytes
(`inline_data`) as an agentfs artifact (content-addressed: a version equal to an earlier one adds no
data), the rest of the part and the version's record as state. Versions count from 0, as ADK's; a
deleted artifact starts again at 0, as in ADK's in-memory service. `user:` filenames are user-scoped.
"""

from __future__ import annotations

import os
import time
from typing import Any, Literal

from google.adk.artifacts import artifact_util
from google.adk.artifacts.base_artifact_service import ArtifactVersion, BaseArtifactService, ensure_part
from google.adk.errors.input_validation_error import InputValidationError
from google.genai import types

import agentfs

from ...api import EncryptionArg
from ..run_names import open_or_use, segment
from .layout import PREFIX, artifacts_root

DATA = "data"  # the agentfs artifact that holds a version's inline bytes


class AgentFSArtifactService(BaseArtifactService):
    """ADK artifacts kept as agentfs checkpoints; `store` as for `AgentFSSessionService`."""

    def __init__(
        self,
        store: agentfs.Store | str | os.PathLike[str] = ".agentfs",
        *,
        prefix: str = PREFIX,
        remote: str | None = None,
        storage_options: dict[str, Any] | None = None,
        durability: Literal["power", "process"] | None = None,
        encryption: EncryptionArg = None,
    ) -> None:
        self.store, self._owns_store = open_or_use(
            store, "AgentFSArtifactService", remote=remote, storage_options=storage_options, durability=durability, encryption=encryption
        )
        self.prefix = prefix

    async def close(self) -> None:
        """Close the store if this service opened it (async, as ADK's database services' `close`)."""
        if self._owns_store:
            self.store.close()

    async def save_artifact(
        self,
        *,
        app_name: str,
        user_id: str,
        filename: str,
        artifact: types.Part | dict[str, Any],
        session_id: str | None = None,
        custom_metadata: dict[str, Any] | None = None,
    ) -> int:
        part = ensure_part(artifact)
        run = self._run(app_name, user_id, filename, session_id)
        if part.inline_data is not None:
            mime_type = part.inline_data.mime_type
        elif part.text is not None:
            mime_type = "text/plain"
        elif part.file_data is not None and not artifact_util.is_artifact_ref(part):
            mime_type = part.file_data.mime_type
        elif part.file_data is None:
            raise InputValidationError("Not supported artifact type.")
        else:
            raise InputValidationError(f"artifact {filename!r}: references to other artifacts are not supported by agentfs")
        return await self.store.to_thread(self._save, run, filename, part, mime_type, custom_metadata or {})

    async def load_artifact(
        self, *, app_name: str, user_id: str, filename: str, session_id: str | None = None, version: int | None = None
    ) -> types.Part | None:
        run = self._run(app_name, user_id, filename, session_id)
        return await self.store.to_thread(self._load, run, version)

    async def list_artifact_keys(self, *, app_name: str, user_id: str, session_id: str | None = None) -> list[str]:
        artifact_util.validate_path_segment(app_name, "app_name")
        artifact_util.validate_path_segment(user_id, "user_id")
        if session_id is not None:
            artifact_util.validate_path_segment(session_id, "session_id")
        roots = [artifacts_root(self.prefix, app_name, user_id, None)]
        if session_id is not None:
            roots.append(artifacts_root(self.prefix, app_name, user_id, session_id))
        return await self.store.to_thread(self._keys, roots)

    async def delete_artifact(self, *, app_name: str, user_id: str, filename: str, session_id: str | None = None) -> None:
        await self.store.to_thread(self._run(app_name, user_id, filename, session_id).delete)

    async def list_versions(self, *, app_name: str, user_id: str, filename: str, session_id: str | None = None) -> list[int]:
        records = await self.store.to_thread(self._versions, self._run(app_name, user_id, filename, session_id))
        return [record.version for record in records]

    async def list_artifact_versions(
        self, *, app_name: str, user_id: str, filename: str, session_id: str | None = None
    ) -> list[ArtifactVersion]:
        return await self.store.to_thread(self._versions, self._run(app_name, user_id, filename, session_id))

    async def get_artifact_version(
        self, *, app_name: str, user_id: str, filename: str, session_id: str | None = None, version: int | None = None
    ) -> ArtifactVersion | None:
        records = await self.store.to_thread(self._versions, self._run(app_name, user_id, filename, session_id))
        if version is None:
            return records[-1] if records else None
        return next((record for record in records if record.version == version), None)

    # blocking work, run on the store's offload pool

    def _run(self, app_name: str, user_id: str, filename: str, session_id: str | None) -> agentfs.Run:
        artifact_util.validate_path_segment(app_name, "app_name")
        artifact_util.validate_path_segment(user_id, "user_id")
        user_scoped = filename.startswith("user:")
        if not user_scoped and session_id is None:
            raise InputValidationError("Session ID must be provided for session-scoped artifacts.")
        if not user_scoped and session_id is not None:
            artifact_util.validate_path_segment(session_id, "session_id")
        return self.store.run(artifacts_root(self.prefix, app_name, user_id, None if user_scoped else session_id) + segment(filename))

    def _save(self, run: agentfs.Run, filename: str, part: types.Part, mime_type: str | None, custom_metadata: dict[str, Any]) -> int:
        stored = part.model_dump(mode="json", exclude_none=True)
        data = part.inline_data.data if part.inline_data is not None else None
        if data is not None:
            stored["inline_data"].pop("data", None)
        while True:
            head = run.latest()
            version = 0 if head is None else head.metadata["version"] + 1
            record = {
                "filename": filename,
                "version": version,
                "canonical_uri": f"agentfs://{run.name}@{version}",
                "mime_type": mime_type,
                "custom_metadata": custom_metadata,
                "create_time": time.time(),
            }
            parent = None if head is None else head.id
            try:
                run.commit({"part": stored}, artifacts=None if data is None else {DATA: data}, metadata=record, parent=parent)
            except agentfs.Conflict:
                continue  # another writer saved a version meanwhile: this one is the next
            return version

    def _load(self, run: agentfs.Run, version: int | None) -> types.Part | None:
        checkpoint = run.latest() if version is None else self._at(run, version)
        if checkpoint is None:
            return None
        stored = dict(checkpoint.state["part"])
        if DATA in checkpoint.artifacts:
            stored["inline_data"] = {**stored["inline_data"], "data": checkpoint.artifacts[DATA].read_bytes()}
        return types.Part.model_validate(stored)

    @staticmethod
    def _at(run: agentfs.Run, version: int) -> agentfs.Checkpoint | None:
        return next((cp for cp in run.history() if cp.metadata.get("version") == version), None)

    def _versions(self, run: agentfs.Run) -> list[ArtifactVersion]:
        versions = [_record(checkpoint.metadata) for checkpoint in run.history()]
        return sorted(versions, key=lambda record: record.version)

    def _keys(self, roots: list[str]) -> list[str]:
        names = []
        for name in self.store.runs():
            head = self.store.run(name).latest() if any(name.startswith(root) for root in roots) else None
            if head is not None:
                names.append(head.metadata["filename"])
        return sorted(names)


def _record(metadata: dict[str, Any]) -> ArtifactVersion:
    return ArtifactVersion(
        version=metadata["version"],
        canonical_uri=metadata["canonical_uri"],
        custom_metadata=metadata["custom_metadata"],
        create_time=metadata["create_time"],
        mime_type=metadata["mime_type"],
    )
