"""Log entries: the ENTRY record keyed `run NUL id` holds the manifest and the small objects of its commit.

"AFL" | version (1 byte) | checksum (32 bytes) | body

Version 2 (written now): checksum = sha256(run NUL id | body), so the entry is bound to its key; body = msgpack
[manifest bytes, [object file bytes, ...]], a format-2 manifest (the run and id left to the key) and the objects its
own PACKED refs name, in the order of their oids, which the manifest gives. Version 1 (read): checksum = sha256(body);
body = msgpack [manifest bytes, [[oid, object file bytes], ...]], a format-1 manifest naming its own run and id,
compared with the key's.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Iterator
from typing import Any

import msgpack

from ..errors import FormatError, IntegrityError, SerializationError
from . import codec
from .manifest import FORMAT, MAP_FORMAT, Manifest
from .refs import EntryAddress, PackedRef, Ref
from .sealed import HEADER

MAGIC = b"AFL"
VERSION = 2  # what a writer writes
MANIFEST_FORMATS = {1: (MAP_FORMAT,), VERSION: (FORMAT,)}  # entry version -> the manifest format it holds


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


def _checksum(version: int, run: str, checkpoint_id: str, body: bytes) -> bytes:
    if version == 1:
        return hashlib.sha256(body).digest()
    digest = hashlib.sha256(f"{run}\0{checkpoint_id}".encode())  # the plain key, in an encrypted store too
    digest.update(body)
    return digest.digest()


def packed_here(manifest: Manifest) -> list[bytes]:
    """The oids of the objects the entry of `manifest` packs, in their order there: its own PACKED refs' (naming no
    entry, or naming this one), each once, sorted. (A loop over both maps: half the time of a chained set
    comprehension, paid by every commit and every read.)"""
    home = (manifest.run, manifest.id)
    oids: set[bytes] = set()
    for value in manifest.state.values():
        ref = value.blob
        if type(ref) is PackedRef and (ref.entry is None or ref.entry == home):
            oids.add(ref.oid)
    for ref in manifest.artifacts.values():
        if type(ref) is PackedRef and (ref.entry is None or ref.entry == home):
            oids.add(ref.oid)
    return sorted(oids)


def encode_entry(manifest: Manifest, pack: dict[bytes, bytes], hasher: codec.Hasher = codec.hash_bytes) -> tuple[bytes, Entry]:
    """The bytes of the entry of checkpoint manifest.run@manifest.id (version 2), and the Entry they decode to.
    `pack` holds what its own PACKED refs name (a writer's BlobWriter.pack), and nothing else is stored."""
    oids = packed_here(manifest)
    try:
        blobs = [pack[oid] for oid in oids]
    except KeyError as missing:
        raise SerializationError(f"checkpoint {manifest.run}@{manifest.id} packs objects it was not given: {missing}") from None
    manifest_bytes = manifest.to_bytes()
    body = msgpack.packb([manifest_bytes, blobs], use_bin_type=True)
    data = MAGIC + bytes((VERSION,)) + _checksum(VERSION, manifest.run, manifest.id, body) + body
    kept = pack if len(pack) == len(oids) else dict(zip(oids, blobs, strict=True))  # equal sizes: the same keys
    return data, Entry(manifest, manifest_bytes, kept, hasher)


def decode_entry_at(data: bytes, run: str, checkpoint_id: str, where: str, hasher: codec.Hasher = codec.hash_bytes) -> Entry:
    """The entry stored under the key `run` NUL `checkpoint_id` (plain names), read from `where`: refused unless
    whole, unaltered, of a version this agentfs reads, well formed, and the checkpoint its key names."""
    if len(data) < HEADER or data[:3] != MAGIC:
        raise IntegrityError(f"log entry {where} is truncated or not a log entry ({len(data)} bytes)")
    version = data[3]
    if version not in MANIFEST_FORMATS:
        raise FormatError(f"log entry {where} has format version {version}, this agentfs reads 1 and 2")
    body = data[HEADER:]
    if _checksum(version, run, checkpoint_id, body) != data[4:HEADER]:
        moved = " or not stored under its own key" if version != 1 else ""
        raise IntegrityError(f"log entry {where} does not match its checksum (corrupt{moved})")
    try:
        manifest_bytes, pack_list = msgpack.unpackb(body, raw=False, use_list=True)
        valid = isinstance(manifest_bytes, bytes) and isinstance(pack_list, list)
    except (ValueError, TypeError, msgpack.UnpackException) as exc:
        raise FormatError(f"log entry {where} is malformed: {exc}") from None
    if not valid:
        raise FormatError(f"log entry {where} is malformed")
    manifest = Manifest.from_bytes(manifest_bytes, run, checkpoint_id, f"log entry {where}", MANIFEST_FORMATS[version])
    if (manifest.run, manifest.id) != (run, checkpoint_id):  # a format-1 manifest names its own
        raise FormatError(f"log entry {where} holds checkpoint {manifest.run}@{manifest.id}")
    pack = _pack_v1(pack_list, where) if version == 1 else _pack(manifest, pack_list, where)
    return Entry(manifest, manifest_bytes, pack, hasher)


def _pack(manifest: Manifest, blobs: list[Any], where: str) -> dict[bytes, bytes]:
    """Version 2: the objects in the order of the oids the manifest's own PACKED refs name (each checked against
    its oid when it is read, as every object is)."""
    oids = packed_here(manifest)
    if len(blobs) != len(oids) or not all(isinstance(blob, bytes) for blob in blobs):
        raise FormatError(f"log entry {where} is malformed: it packs {len(blobs)} objects where its manifest names {len(oids)}")
    return dict(zip(oids, blobs, strict=True))


def _pack_v1(pack_list: list[Any], where: str) -> dict[bytes, bytes]:
    """Version 1: [[oid, object file bytes], ...]."""
    pack: dict[bytes, bytes] = {}
    for item in pack_list:
        pair = isinstance(item, list) and len(item) == 2
        if not (pair and isinstance(item[0], bytes) and len(item[0]) == 32 and isinstance(item[1], bytes)):
            raise FormatError(f"log entry {where} is malformed: packed object {str(item)[:80]}")
        pack[item[0]] = item[1]
    return pack
