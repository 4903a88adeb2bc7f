"""Unlocking an encrypted store: where the passphrase or key file comes from, and the key slots in keys/.

A slot is one file, `keys/<slot id>`, created once and never rewritten (format/crypto.py makes and
opens its bytes); adding or removing a slot never touches the store's data. The master key is never
written unwrapped.

Where the secret comes from, first found wins: `Encryption(passphrase=...)` or `Encryption(key_file=...)`,
else the environment variable AGENTFS_PASSWORD, else the file named by AGENTFS_PASSWORD_FILE (restic's
convention; its trailing newline dropped). The CLI prompts when none is set.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from ..errors import FormatError, WrongKey
from ..format import crypto, keys
from ..fsutil import fsync_dir, make_dirs, write_atomic

PASSWORD_ENV = "AGENTFS_PASSWORD"
PASSWORD_FILE_ENV = "AGENTFS_PASSWORD_FILE"


@dataclasses.dataclass(frozen=True)
class Encryption:
    """How to unlock (or create) an encrypted store: a passphrase or a key file; with neither, the environment."""

    passphrase: str | None = dataclasses.field(default=None, repr=False)
    key_file: str | os.PathLike[str] | None = None
    scrypt_n: int = crypto.SCRYPT_N  # the cost of a new passphrase slot (scrypt's N)

    def secret(self, *, required: bool = True) -> tuple[str, bytes] | None:
        """(slot type, secret bytes) from this or the environment; None (or WrongKey if `required`) if none is set."""
        if self.passphrase is not None:
            return "passphrase", self.passphrase.encode()
        if self.key_file is not None:
            path = Path(self.key_file)
            try:
                return "key-file", crypto.key_file_secret(path.read_bytes(), str(path))
            except OSError as exc:
                raise WrongKey(f"key file {path} cannot be read: {exc.strerror or exc}") from None
        if os.environ.get(PASSWORD_ENV):
            return "passphrase", os.environ[PASSWORD_ENV].encode()
        if os.environ.get(PASSWORD_FILE_ENV):
            path = Path(os.environ[PASSWORD_FILE_ENV])
            try:
                return "passphrase", path.read_bytes().rstrip(b"\r\n")
            except OSError as exc:
                raise WrongKey(f"{PASSWORD_FILE_ENV} names {path}, which cannot be read: {exc.strerror or exc}") from None
        if required:
            raise WrongKey(f"no passphrase or key file given: pass encryption=, or set {PASSWORD_ENV} or {PASSWORD_FILE_ENV}")
        return None


@dataclasses.dataclass(frozen=True)
class Unlocked:
    """A master key already unlocked (from an encrypted remote's slots), and the slots that wrap it."""

    master: bytes = dataclasses.field(repr=False)
    slots: list[crypto.Slot]


EncryptionArg = Encryption | str | bool | None  # what open() takes: a str is a passphrase, True the environment's


def as_encryption(value: EncryptionArg) -> Encryption | None:
    if value is None or value is False:
        return None
    if value is True:
        return Encryption()
    if isinstance(value, str):
        return Encryption(passphrase=value)
    if isinstance(value, Encryption):
        return value
    raise TypeError(f"encryption must be an agentfs.Encryption, a passphrase str or True, got {type(value).__name__}")


def unlock(slots: list[crypto.Slot], key_id: str, encryption: Encryption | None, where: str) -> bytes:
    """The master key of the store or remote `where` whose config names `key_id`, from the first slot the secret opens."""
    found = (encryption or Encryption()).secret()
    assert found is not None
    slot_type, secret = found
    candidates = [slot for slot in slots if slot.key_id == key_id and slot.type == slot_type]
    if not candidates:
        raise WrongKey(f"{where} is encrypted and has no {slot_type} key slot: try the other kind of key (agentfs key list)")
    for slot in candidates:
        master = crypto.open_slot(slot, secret, f"{where} key slot {slot.slot_id}")
        if master is not None and crypto.key_id(master) == key_id:
            return master
    raise WrongKey(f"wrong {'passphrase' if slot_type == 'passphrase' else 'key file'} for {where}")


def new_slot(master: bytes, encryption: Encryption, *, label: str = "") -> crypto.Slot:
    found = encryption.secret()
    assert found is not None
    return crypto.make_slot(master, found[1], found[0], label=label, scrypt_n=encryption.scrypt_n)


# the local store's slots: keys/<slot id>


def slots_dir(root: Path) -> Path:
    return root / keys.KEY_SLOTS


def read_slots(root: Path) -> list[crypto.Slot]:
    directory = slots_dir(root)
    found = []
    for path in sorted(directory.iterdir()) if directory.is_dir() else []:
        if path.name.startswith("."):
            continue
        try:
            found.append(crypto.decode_slot(path.read_bytes(), str(path)))
        except FormatError:
            continue  # a damaged slot opens nothing; the others may
    return found


def write_slot(root: Path, tmp_dir: Path, slot: crypto.Slot, *, sync: bool) -> None:
    """keys/<slot id>, created once (durable with `sync`)."""
    directory = slots_dir(root)
    make_dirs(directory, sync=sync)
    write_atomic(tmp_dir, directory / slot.slot_id, slot.to_bytes(), sync=sync)


def remove_slot(root: Path, slot_id: str, *, sync: bool) -> None:
    """Drop a slot; refuses to drop the last one (the store could never be opened again)."""
    slots = read_slots(root)
    if slot_id not in {slot.slot_id for slot in slots}:
        raise WrongKey(f"{root} has no key slot {slot_id!r} (agentfs key list)")
    if len(slots) == 1:
        raise WrongKey(f"key slot {slot_id} is the last one of {root}: add another first (agentfs key add)")
    (slots_dir(root) / slot_id).unlink()
    if sync:
        fsync_dir(slots_dir(root))


class StoreKeys:
    """The key slots of one store (`store.keys`), for `agentfs key add/remove/passwd`: each change is durable
    (with durability="power") when it returns. A plaintext store has no master key and takes no slot."""

    def __init__(self, root: Path, tmp_dir: Path, sealer: crypto.Sealer | None, *, sync: bool) -> None:
        self.root = root
        self._tmp_dir = tmp_dir
        self._sealer = sealer
        self._sync = sync

    @property
    def master(self) -> bytes | None:
        """The unlocked master key, which every slot wraps; None for a plaintext store."""
        return None if self._sealer is None else self._sealer.master

    def new_slot(self, encryption: Encryption, *, label: str = "") -> crypto.Slot:
        """A new slot wrapping the master key, opened by `encryption`'s passphrase or key file; `add` writes it."""
        if self._sealer is None:
            raise FormatError(f"{self.root} is not encrypted: it has no key slots")
        return new_slot(self._sealer.master, encryption, label=label)

    def slots(self) -> list[crypto.Slot]:
        """Every slot in keys/, in slot id order."""
        return read_slots(self.root)

    def add(self, slot: crypto.Slot) -> None:
        """Write `slot` (made by `new_slot` from the master key) beside the others."""
        write_slot(self.root, self._tmp_dir, slot, sync=self._sync)

    def remove(self, slot_id: str) -> None:
        """Delete the slot `slot_id`: its passphrase or key file no longer unlocks this store."""
        remove_slot(self.root, slot_id, sync=self._sync)
