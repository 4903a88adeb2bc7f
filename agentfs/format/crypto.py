"""Encrypted stores: the keys, sealed record bodies, keyed object ids, hidden run names and key slots
(docs/FORMAT.md, "Encryption"). Bytes only, no I/O; every primitive is `cryptography`'s.

- A random 32-byte master secret; HKDF-SHA256 derives one subkey per use (record AEAD, object id,
  run names, key id), so no key serves two purposes.
- Record bodies: AES-256-GCM, a random 96-bit nonce per record, the associated data binding the
  record's kind and stored key: a body moved to another key or kind does not authenticate.
- Object ids: HMAC-SHA256 under the object-id key, so an id confirms no guess of the content; every
  machine holding the master computes the same id (dedup holds across a shared remote).
- Run names: AES-SIV (deterministic, authenticated) of the name padded to 16 bytes, base64url: the
  same name gives the same stored name on every machine, and only a key holder reads it back.
- Key slots: the master wrapped (AES-256-GCM) under a key made from a passphrase (scrypt) or a key
  file (HKDF); a slot that does not authenticate is the wrong passphrase or key file.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import os
import time
from collections.abc import Sequence
from typing import Any

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives import hmac as crypto_hmac
from cryptography.hazmat.primitives.ciphers.aead import AESGCM, AESSIV
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from cryptography.hazmat.primitives.kdf.scrypt import Scrypt

from ..errors import FormatError, IntegrityError, InvalidName, WrongKey
from . import groups, kinds

MASTER_LENGTH = 32
NONCE_LENGTH = 12  # AES-GCM's 96-bit nonce, random per record
TAG_LENGTH = 16
# a sealed body is nonce | ciphertext | tag, no magic nor version: the config's "encryption" field names the
# scheme, and a body that is anything else fails its tag
SEALED_OVERHEAD = NONCE_LENGTH + TAG_LENGTH  # 28 bytes a record
# Random nonces: at most 2^32 records per master key keeps the chance of a repeated nonce under 2^-32
# (NIST SP 800-38D, 8.3); a store reaching it must be copied to a new key (agentfs copy --encrypt).
RECORDS_PER_KEY = 1 << 32
CIPHER = "aes-256-gcm"
HASH = "hmac-sha256"  # the config's "hash" of an encrypted store: today's readers refuse it by name
NAME_BLOCK = 16  # names are padded with NUL to a multiple of this before AES-SIV: lengths leak in steps
NAME_PIECE = 127  # base64url characters per segment of a stored run name, each segment prefixed "_"
RUN_NAME_MAX = 720  # bytes: the longest run name whose stored name fits names.MAX_NAME (1024)
SCRYPT_N, SCRYPT_R, SCRYPT_P = 1 << 15, 8, 1  # 32 MiB, about 0.1 s: restic's and kopia's order
SCRYPT_MAX_NR = 1 << 21  # n * r: 256 MiB of memory at most
SLOT_FORMAT = 1
SLOT_TYPES = ("passphrase", "key-file")
SEAL_INTO_FROM = 64 << 10  # bytes: a body this large is sealed into a buffer of its own (Sealer.seal)
_KIND_BYTES = tuple(bytes((kind,)) for kind in range(256))  # a record kind as the first byte of its associated data


def _derive(master: bytes, info: bytes, length: int = 32) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=length, salt=None, info=b"agentfs " + info).derive(master)


def key_id(master: bytes) -> str:
    """What the config records of its master key: tells which slots open this store (not secret)."""
    return _derive(master, b"key id", 16).hex()


class Sealer:
    """The keys of one encrypted store, derived from its master secret."""

    def __init__(self, master: bytes) -> None:
        if len(master) != MASTER_LENGTH:
            raise WrongKey(f"a master key is {MASTER_LENGTH} bytes, got {len(master)}")
        self.master = master
        self.key_id = key_id(master)
        self._records = AESGCM(_derive(master, b"record key"))
        # HMAC's keyed state made once, copied per id: setting the key up again per call (hmac.digest) cost
        # 24 us an id of a 3 KB chunk, a copy 15 us, sha256 10 us (a loaded 2-core machine, timeit)
        self._ids = crypto_hmac.HMAC(_derive(master, b"object id key"), hashes.SHA256())
        self._names = AESSIV(_derive(master, b"name key", 64))
        self._stored: dict[str, str] = {}
        self._stored_prefixes: dict[bytes, bytes] = {}  # a plain run name's bytes -> its stored name's and a NUL (stored_key)
        self._shown: dict[str, str] = {}

    # object ids

    def object_id(self, data: bytes | memoryview) -> bytes:
        keyed = self._ids.copy()
        keyed.update(data)
        return keyed.finalize()

    # record bodies

    def seal(self, kind: int, key: bytes, body: bytes | bytearray | memoryview) -> bytes | bytearray:
        """nonce | ciphertext | tag. A body under SEAL_INTO_FROM is encrypted and the nonce joined in front; a larger
        one is encrypted into one buffer made for it, as `nonce + encrypt(...)` made and copied a second large one,
        which cost a 700 KB chunk 1.4 ms against 0.4 ms (fresh large buffers fault their pages in). For a commit's
        few KB the join is the cheaper: sealing 5.3 KB took 29.9 k instructions joined, 33.3 k into a buffer
        (callgrind, 5,000 seals; the buffer, its slice and its view cost more than copying the small body)."""
        nonce = os.urandom(NONCE_LENGTH)
        associated = _KIND_BYTES[kind] + key
        if len(body) < SEAL_INTO_FROM:
            return nonce + self._records.encrypt(nonce, body, associated)
        sealed = bytearray(NONCE_LENGTH + len(body) + TAG_LENGTH)
        sealed[:NONCE_LENGTH] = nonce
        self._records.encrypt_into(nonce, body, associated, memoryview(sealed)[NONCE_LENGTH:])
        return sealed

    def open(self, kind: int, key: bytes, data: bytes | memoryview, where: str) -> bytes:
        """The body sealed in `data` for (kind, stored key); IntegrityError before anything is decompressed or parsed."""
        if len(data) < SEALED_OVERHEAD:
            raise IntegrityError(f"{where}: not a sealed record ({len(data)} bytes)")
        try:
            return self._records.decrypt(bytes(data[:NONCE_LENGTH]), memoryview(data)[NONCE_LENGTH:], _KIND_BYTES[kind] + key)
        except InvalidTag:
            raise IntegrityError(f"{where}: sealed record does not authenticate (damaged, moved, or sealed under another key)") from None

    # groups: several small records sealed as one GROUP record (format/groups.py)

    def seal_group(self, members: Sequence[tuple[int, bytes, bytes]]) -> bytes | bytearray:
        """A GROUP record's body (its key is empty): the members (kind, plain key, plaintext body: groups.Member, or a
        writer's segment.Record as it is), sealed together."""
        return self.seal(kinds.GROUP, b"", groups.encode_inner(members))

    def open_group(self, key: bytes, body: bytes | memoryview, where: str) -> list[groups.Member]:
        """The members of the GROUP record (key, body), authenticated whole before any of it is parsed, then checked
        (groups.decode_inner); IntegrityError or FormatError naming `where`."""
        if key:
            raise FormatError(f"{where}: a group of records has a key ({len(key)} bytes); a group's is empty")
        if len(body) > groups.MAX_INNER + SEALED_OVERHEAD:  # checked before the decryption allocates it
            raise IntegrityError(f"{where}: a group of records of {len(body)} bytes, over the largest ({groups.MAX_INNER})")
        return groups.decode_inner(self.open(kinds.GROUP, key, body, where), where)

    def group_members(self, key: bytes, body: bytes, where: str) -> list[tuple[int, bytes]]:
        """(kind, stored key) of each record of a GROUP record: what a scan indexes at the group's location."""
        return [(member.kind, self.stored_key(member.kind, member.key)) for member in self.open_group(key, body, where)]

    # run names

    def stored_run(self, name: str) -> str:
        """The run's name as segments, footers, pack indexes and remote keys hold it."""
        stored = self._stored.get(name)
        if stored is None:
            raw = name.encode()
            if len(raw) > RUN_NAME_MAX:
                raise InvalidName(f"run name {name[:40]!r}... is {len(raw)} bytes: an encrypted store's are at most {RUN_NAME_MAX}")
            padded = raw + b"\0" * (-len(raw) % NAME_BLOCK)  # names hold no NUL (names.py)
            text = base64.urlsafe_b64encode(self._names.encrypt(padded, None)).decode("ascii").rstrip("=")
            stored = "/".join("_" + text[i : i + NAME_PIECE] for i in range(0, len(text), NAME_PIECE))
            self._stored[name] = stored
            self._shown[stored] = name
        return stored

    def run_name(self, stored: str, where: str = "") -> str:
        """The name a stored run name stands for; FormatError if it is not one this key made."""
        name = self._shown.get(stored)
        if name is not None:
            return name
        text = "".join(piece[1:] for piece in stored.split("/"))
        try:
            sealed = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
            name = self._names.decrypt(sealed, None).rstrip(b"\0").decode()
        except (ValueError, InvalidTag, UnicodeDecodeError):
            raise FormatError(f"{where}: stored run name {stored[:40]!r} is not one of this store's key") from None
        self._stored[name] = stored
        self._shown[stored] = name
        return name

    def stored_key(self, kind: int, key: bytes) -> bytes:
        """A record key as stored: a run record's or fork's run names replaced by their stored names."""
        if kind == kinds.OBJECT:
            return key
        first, nul, rest = key.partition(b"\0")
        prefix = self._stored_prefixes.get(first) if nul and rest and kind != kinds.FORK else None
        if prefix is not None:  # a run seen before: its stored name's bytes and the NUL, joined to the id as they are
            return prefix + rest
        run, second = kinds.split_pair_key(key, "record key")
        if kind == kinds.FORK:
            return kinds.pair_key(self.stored_run(run), self.stored_run(second))
        stored = kinds.pair_key(self.stored_run(run), second)
        self._stored_prefixes[first] = stored[: len(stored) - len(rest)]
        return stored

    def plain_key(self, kind: int, key: bytes, where: str) -> bytes:
        """stored_key's inverse."""
        if kind == kinds.OBJECT or kind not in kinds.KNOWN:
            return key
        first, second = kinds.split_pair_key(key, where)
        if kind == kinds.FORK:
            second = self.run_name(second, where)
        return kinds.pair_key(self.run_name(first, where), second)


# key slots: the master wrapped under a passphrase or a key file


@dataclasses.dataclass(frozen=True)
class Slot:
    """One way to unlock a store: its master key wrapped under a passphrase or a key file."""

    slot_id: str  # 16 hex digits
    key_id: str
    type: str  # "passphrase" | "key-file"
    kdf: dict[str, Any]
    wrapped: bytes
    created: int
    label: str = ""

    def to_bytes(self) -> bytes:
        fields = dataclasses.asdict(self)
        fields["wrapped"] = base64.b64encode(self.wrapped).decode("ascii")
        return (json.dumps({"format": SLOT_FORMAT, **fields}, indent=2, sort_keys=True) + "\n").encode()

    def describe(self) -> dict[str, Any]:
        return {"slot": self.slot_id, "type": self.type, "label": self.label, "created": self.created, "kdf": self.kdf.get("name")}


def _b64(text: object, where: str) -> bytes:
    try:
        return base64.b64decode(str(text), validate=True)
    except ValueError:
        raise FormatError(f"{where}: not base64") from None


def decode_slot(data: bytes, where: str) -> Slot:
    try:
        fields = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise FormatError(f"key slot {where} is not JSON: {exc}") from None
    if not isinstance(fields, dict) or fields.get("format") != SLOT_FORMAT:
        raise FormatError(f"key slot {where} is not a format-{SLOT_FORMAT} key slot")
    try:
        slot = Slot(
            slot_id=str(fields["slot_id"]),
            key_id=str(fields["key_id"]),
            type=str(fields["type"]),
            kdf=dict(fields["kdf"]),
            wrapped=_b64(fields["wrapped"], f"key slot {where}: its wrapped key"),
            created=int(fields["created"]),
            label=str(fields.get("label", "")),
        )
    except FormatError:
        raise
    except (ValueError, KeyError, TypeError) as exc:
        raise FormatError(f"key slot {where} is malformed: {type(exc).__name__}: {exc}") from None
    if slot.type not in SLOT_TYPES:
        raise FormatError(f"key slot {where} has unknown type {slot.type!r}")
    return slot


def _wrapping_key(kdf: dict[str, Any], secret: bytes, where: str) -> bytes:
    salt = _b64(kdf.get("salt"), where)
    if kdf.get("name") == "scrypt":
        n, r, p = (kdf.get(k) for k in ("n", "r", "p"))
        # a slot may come from a hostile remote: scrypt's memory (128 * n * r bytes) is bounded before it runs
        bounded = all(isinstance(v, int) for v in (n, r, p)) and 2 <= n <= 1 << 20 and 1 <= r <= 32 and 1 <= p <= 16  # type: ignore[operator]
        if not bounded or n * r > SCRYPT_MAX_NR:  # type: ignore[operator]
            raise FormatError(f"key slot {where}: scrypt parameters n={n}, r={r}, p={p} out of range (at most 256 MiB)")
        return Scrypt(salt=salt, length=32, n=n, r=r, p=p).derive(secret)  # type: ignore[arg-type]
    if kdf.get("name") == "hkdf-sha256":
        return HKDF(algorithm=hashes.SHA256(), length=32, salt=salt, info=b"agentfs key file").derive(secret)
    raise FormatError(f"key slot {where}: unknown key derivation {kdf.get('name')!r}")


def _slot_ad(slot_id: str, master_key_id: str) -> bytes:
    return f"agentfs key slot\0{slot_id}\0{master_key_id}".encode()


def make_slot(master: bytes, secret: bytes, slot_type: str, *, label: str = "", scrypt_n: int = SCRYPT_N) -> Slot:
    """A new slot wrapping `master` under `secret` (a passphrase's UTF-8 bytes, or a key file's bytes)."""
    if slot_type not in SLOT_TYPES:
        raise ValueError(f"slot type must be one of {SLOT_TYPES}")
    salt = base64.b64encode(os.urandom(16)).decode("ascii")
    kdf: dict[str, Any] = (
        {"name": "scrypt", "n": scrypt_n, "r": SCRYPT_R, "p": SCRYPT_P, "salt": salt}
        if slot_type == "passphrase"
        else {"name": "hkdf-sha256", "salt": salt}
    )
    slot_id = os.urandom(8).hex()
    master_id = key_id(master)
    nonce = os.urandom(NONCE_LENGTH)
    wrapped = nonce + AESGCM(_wrapping_key(kdf, secret, slot_id)).encrypt(nonce, master, _slot_ad(slot_id, master_id))
    return Slot(slot_id, master_id, slot_type, kdf, wrapped, int(time.time()), label)


def open_slot(slot: Slot, secret: bytes, where: str) -> bytes | None:
    """The master key `slot` wraps, or None if `secret` is not its passphrase or key file."""
    try:
        key = _wrapping_key(slot.kdf, secret, where)
        return AESGCM(key).decrypt(slot.wrapped[:NONCE_LENGTH], slot.wrapped[NONCE_LENGTH:], _slot_ad(slot.slot_id, slot.key_id))
    except (InvalidTag, ValueError):
        return None


def key_file_secret(data: bytes, where: str) -> bytes:
    """A key file's secret: its bytes, at least 32 (agentfs key add --new-key-file writes 32 random bytes, base64)."""
    secret = data.strip()
    if len(secret) < 32:
        raise WrongKey(f"key file {where} holds {len(secret)} bytes: a key file holds at least 32")
    return secret


def new_key_file() -> bytes:
    return base64.b64encode(os.urandom(32)) + b"\n"


def new_master() -> bytes:
    return os.urandom(MASTER_LENGTH)


def plain_object_id(data: bytes | memoryview) -> bytes:
    """A plaintext store's object id: sha256."""
    return hashlib.sha256(data).digest()
