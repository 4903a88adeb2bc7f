"""agentfs.testing.RemoteConformance on every remote backend agentfs supports: file://, memory://, S3 (moto)
and GCS (gcp-storage-emulator), through the `remote` fixture of tests/servers.py (a fresh location each)."""

from __future__ import annotations

from agentfs.testing import RemoteConformance


class TestRemoteBackends(RemoteConformance):
    pass
