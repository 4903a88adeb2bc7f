"""Log entry files: runs/<run>/log/<id> holds the manifest and the small objects of its commit.

"AFL" | version (1 byte) | sha256(body) (32 bytes) | body
body = msgpack [manifest bytes, [[oid, object file bytes], ...]]
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

import msgpack

from ..errors import FormatError
from . import codec
from .manifest import Manifest
from .refs import EntryAddress, PackedRef, Ref
from .sealed import seal, unseal

MAGIC = b"AFL"
VERSION = 1


@dataclasses.dataclass(frozen=True)
class Entry:
    manifest: Manifest
    manifest_bytes: bytes
    pack: dict[bytes, bytes]  # oid -> object file bytes (verified on read)
    hasher: codec.Hasher = dataclasses.field(default=codec.hash_bytes, compare=False, repr=False)  # how its oids were made

    def refs(self) -> Iterator[tuple[str, Ref]]:
        """(label, blob ref) for every value and artifact of the checkpoint."""
        for key, value in self.manifest.state.items():
            yield f"state[{key!r}]", value.blob
        for name, ref in self.manifest.artifacts.items():
            yield f"artifact {name!r}", ref

    def blob_refs(self) -> list[Ref]:
        """refs() without the labels, which cost a commit more than the refs (each one an f-string)."""
        return self.manifest.blob_refs()

    def borrowed(self) -> set[EntryAddress]:
        """Other entries whose packed objects this checkpoint uses."""
        return {ref.entry for ref in self.blob_refs() if isinstance(ref, PackedRef) and ref.entry is not None}

    def packed(self, oid: bytes, where: str) -> bytes:
        blob = self.pack.get(oid)
        if blob is None:
            raise FormatError(f"{where} does not pack object {oid.hex()}")
        return codec.decode(blob, oid, f"{where} (packed)", self.hasher)


def encode_entry(manifest: Manifest, pack: dict[bytes, bytes], hasher: codec.Hasher = codec.hash_bytes) -> tuple[bytes, Entry]:
    """The entry file's bytes, and the Entry they decode to."""
    manifest_bytes = manifest.to_bytes()
    body = msgpack.packb([manifest_bytes, [[oid, pack[oid]] for oid in sorted(pack)]], use_bin_type=True)
    return seal(MAGIC, VERSION, body), Entry(manifest, manifest_bytes, pack, hasher)


def decode_entry_at(data: bytes, run: str, checkpoint_id: str, where: str, hasher: codec.Hasher = codec.hash_bytes) -> Entry:
    """decode_entry, refusing an entry whose manifest is not the checkpoint its path names."""
    entry = decode_entry(data, where, hasher)
    if (entry.manifest.run, entry.manifest.id) != (run, checkpoint_id):
        raise FormatError(f"log entry {where} holds checkpoint {entry.manifest.run}@{entry.manifest.id}")
    return entry


def decode_entry(data: bytes, where: str, hasher: codec.Hasher = codec.hash_bytes) -> Entry:
    body = unseal(data, MAGIC, VERSION, "log entry", where)
    try:
        manifest_bytes, pack_list = msgpack.unpackb(body, raw=False, use_list=True)
        pack = {oid: blob for oid, blob in pack_list}
        valid = isinstance(manifest_bytes, bytes) and all(
            isinstance(o, bytes) and len(o) == 32 and isinstance(b, bytes) for o, b in pack.items()
        )
    except (ValueError, TypeError, msgpack.UnpackException) as exc:
        raise FormatError(f"log entry {where} is malformed: {exc}") from None
    if not valid:
        raise FormatError(f"log entry {where} is malformed")
    return Entry(Manifest.from_bytes(manifest_bytes, f"log entry {where}"), manifest_bytes, pack, hasher)
