"""A format-2 manifest read from docs/FORMAT.md alone ("Manifest"): its array of 9 fields given back as the map of
the spec's field names, with the run and id of its entry's key and every id as text.

It imports nothing from agentfs, so the spec-only reader of the test vectors (tests/format/test_vectors_from_spec.py)
and the byte-level tests (tests/format/test_bytes_on_disk.py) can both use it.
"""

from __future__ import annotations

from typing import Any

CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"
MANIFEST_FIELDS = 9


def ulid_text(raw: bytes) -> str:
    """A ULID's 16 bytes as its 26 Crockford base32 digits (130 bits, the top 2 zero)."""
    assert isinstance(raw, bytes) and len(raw) == 16
    number = int.from_bytes(raw, "big")
    return "".join(CROCKFORD[(number >> shift) & 31] for shift in range(125, -1, -5))


def manifest_map(fields: Any, run: str, checkpoint_id: str) -> dict[str, Any]:
    """The manifest whose decoded array is `fields`, stored under the key `run` NUL `checkpoint_id`, as a map:
    format, run, id, parent, created, writer (store, host, pid), metadata, state, artifacts and each optional field."""
    assert isinstance(fields, list) and len(fields) == MANIFEST_FIELDS and fields[0] == 2
    _format, parent, created, writer, metadata, kind, state, artifacts, optional = fields
    assert isinstance(writer, list) and len(writer) == 3  # [store id's 16 bytes, host, pid]
    manifest = {
        "format": 2,
        "run": run,
        "id": checkpoint_id,
        "parent": None if parent is None else ulid_text(parent),
        "created": created,
        "writer": {"store": ulid_text(writer[0]), "host": writer[1], "pid": writer[2]},
        "metadata": metadata,
        "state": [("map", "value")[kind], state],
        "artifacts": artifacts,
        **optional,
    }
    if "forked_from" in optional:
        manifest["forked_from"] = [optional["forked_from"][0], ulid_text(optional["forked_from"][1])]
    return manifest
