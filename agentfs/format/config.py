"""The store's config file: format version, store id, hash, codec and chunking parameters (JSON)."""

from __future__ import annotations

import json
from typing import Any

from ulid import ULID

from ..errors import FormatError
from . import chunking, refs
from .bounded_json import load_json

FORMAT = 2  # a local store's layout: segments (docs/FORMAT.md)
REMOTE_FORMAT = 2  # a remote's layout: packs, pack indexes, head keys (docs/FORMAT.md)
MAX_CONFIG = 1 << 20  # a config is under 1 KB; a reader refuses one over this


def new_config() -> dict[str, Any]:
    return {
        "format": FORMAT,
        "store_id": str(ULID()),
        "hash": "sha256",
        "codec": "zstd-3",
        "chunking": {
            "algorithm": "fastcdc-2020",
            "small": chunking.SMALL.to_json(),
            "large": chunking.LARGE.to_json(),
            "large_value_over": chunking.LARGE_VALUE,
        },
        "inline_max": refs.INLINE_MAX,
        "pack_max": refs.PACK_MAX,
    }


# what a remote's config holds: how its bytes are made, nothing about one store (its id, its retention)
REMOTE_FIELDS = ("format", "hash", "codec", "chunking", "inline_max", "pack_max", "encryption")
ENCRYPTED_HASH = "hmac-sha256"  # an encrypted store's keyed object ids (format/crypto.py): readers without encryption refuse it


# The "encryption" field's format: 1, every record sealed alone; 2, a store's segments may also hold GROUP
# records (small records sealed together, format/groups.py), which a reader of format 1 would skip as an unknown
# kind, losing the records inside: so it refuses format 2 by this number. New stores are made with 2. A
# remote's packs hold records sealed alone in both, so a remote's config says 1 (older agentfs keeps reading it).
ENCRYPTION_FORMAT = 2
ENCRYPTION_FORMATS = (1, 2)  # what this agentfs reads
REMOTE_ENCRYPTION_FORMAT = 1
GROUPS_FROM = 2  # the encryption format from which a store's segments hold groups


def remote_config(config: dict[str, Any]) -> dict[str, Any]:
    """The config a pusher publishes on a remote: the store's format fields only, with the remote's format."""
    fields = {**{key: config[key] for key in REMOTE_FIELDS if key in config}, "format": REMOTE_FORMAT}
    if "encryption" in fields:
        fields["encryption"] = {**fields["encryption"], "format": REMOTE_ENCRYPTION_FORMAT}
    return fields


def encryption_config(key_id: str) -> dict[str, Any]:
    """A new store's "encryption" field: the ciphers, and which master key (key slots name it too)."""
    return {"format": ENCRYPTION_FORMAT, "cipher": "aes-256-gcm", "names": "aes-siv-512", "ids": ENCRYPTED_HASH, "key_id": key_id}


def encrypted(config: dict[str, Any]) -> dict[str, Any] | None:
    """The config's "encryption" field, checked; None for a plaintext store."""
    field = config.get("encryption")
    if field is None:
        return None
    if not isinstance(field, dict) or not isinstance(field.get("key_id"), str):
        raise FormatError(f"config's encryption field {str(field)[:80]} is not one this agentfs reads")
    if field.get("format") not in ENCRYPTION_FORMATS:
        known = " and ".join(map(str, ENCRYPTION_FORMATS))
        raise FormatError(f"config's encryption format {str(field.get('format'))[:40]} is not one this agentfs reads (it reads {known})")
    return field


def encode_config(config: dict[str, Any]) -> bytes:
    return (json.dumps(config, indent=2, sort_keys=True) + "\n").encode()


def check_config(data: bytes, where: str, expected: int, format_1: str) -> dict[str, Any]:
    """A config's fields, refused unless it is of format `expected` and sha256; a format-1 one with `format_1`."""
    config = load_json(data, where, max_bytes=MAX_CONFIG)
    if not isinstance(config, dict):
        raise FormatError(f"{where} is not an agentfs config")
    if config.get("format") == 1:
        raise FormatError(format_1)
    if config.get("format") != expected:
        raise FormatError(f"{where} has format {config.get('format')!r}; this agentfs reads format {expected}")
    if config.get("hash") == ENCRYPTED_HASH and isinstance(config.get("encryption"), dict):
        return config
    if config.get("hash") != "sha256" or "encryption" in config:
        raise FormatError(f"{where} uses hash {config.get('hash')!r}; this agentfs knows sha256")
    return config


def check_remote_config(data: bytes, where: str) -> dict[str, Any]:
    """A remote's config; a format-1 remote is refused (remotes are not upgraded)."""
    refusal = f"{where} is a format-1 remote; this agentfs pushes and reads format 2: push to a fresh URL (remotes are not upgraded)"
    return check_config(data, where, REMOTE_FORMAT, refusal)


def check_store_config(data: bytes, where: str, store: str) -> dict[str, Any]:
    """A local store's config, read from `where` in the store at `store`; a format-1 store is refused with the
    command that converts it."""
    upgrade = f"{store} is a format-1 agentfs store; run 'agentfs upgrade {store}' to convert it"
    config = check_config(data, where, FORMAT, upgrade)
    if not isinstance(config.get("store_id"), str):
        raise FormatError(f"{where} has no store_id: not an agentfs store config")
    return config
