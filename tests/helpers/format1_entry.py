"""Log entries as agentfs wrote them before manifest format 2 (docs/FORMAT.md, "Log entries", version 1): a
format-1 manifest (a map naming every field, the run and id among them) in an entry whose checksum is sha256(body).

Every reader still reads them, so the tests of what a reader checks in a format-1 entry build them here, from a
typed manifest, with any field changed to what a hostile or older writer would put there."""

from __future__ import annotations

import hashlib
from typing import Any

import msgpack

from agentfs.format.manifest import Manifest, encode_value_ref
from agentfs.format.refs import encode_ref


def format1_manifest(manifest: Manifest, **changes: Any) -> dict[str, Any]:
    record: dict[str, Any] = {
        "format": 1,
        "run": manifest.run,
        "id": manifest.id,
        "parent": manifest.parent,
        "created": manifest.created,
        "writer": manifest.writer,
        "metadata": manifest.metadata,
        "state": [manifest.state_kind, {key: encode_value_ref(value) for key, value in manifest.state.items()}],
        "artifacts": {name: encode_ref(ref) for name, ref in manifest.artifacts.items()},
    }
    if manifest.forked_from is not None:
        record["forked_from"] = manifest.forked_from
    if manifest.schema is not None:
        record["schema"] = manifest.schema
    record.update(changes)
    return record


def format1_entry(manifest: Manifest, pack: dict[bytes, bytes], **changes: Any) -> bytes:
    """The version-1 entry of `manifest` (its fields changed by `changes`) packing `pack`."""
    manifest_bytes = msgpack.packb(format1_manifest(manifest, **changes), use_bin_type=True)
    return seal1([manifest_bytes, [[oid, pack[oid]] for oid in sorted(pack)]])


def seal1(body: Any) -> bytes:
    """A version-1 entry of the msgpack body `body`: "AFL" | 1 | sha256(body) | body."""
    data = msgpack.packb(body, use_bin_type=True)
    return b"AFL\x01" + hashlib.sha256(data).digest() + data
