"""Retirement records: what retention removed from a run, on purpose.

"AFR" | version (1 byte, = 1) | sha256(body) (32 bytes) | body
body = msgpack {"format": 1, "run", "id", "created", "writer", "checkpoints": [id...], "journal": [id...]}
"""

from __future__ import annotations

import dataclasses
from typing import Any

import msgpack

from ..errors import FormatError
from ..names import check_id, check_name
from .sealed import seal, unseal

MAGIC = b"AFR"
VERSION = 1


@dataclasses.dataclass(frozen=True)
class Retirement:
    run: str
    id: str
    created: int
    checkpoints: list[str]
    journal: list[str]


def encode_retirement(record: Retirement, writer: dict[str, Any]) -> bytes:
    body = msgpack.packb(
        {
            "format": 1,
            "run": record.run,
            "id": record.id,
            "created": record.created,
            "writer": writer,
            "checkpoints": record.checkpoints,
            "journal": record.journal,
        },
        use_bin_type=True,
    )
    return seal(MAGIC, VERSION, body)


def decode_retirement(data: bytes, run: str, record_id: str, where: str) -> Retirement:
    """A retirement record, refused unless intact and naming the run and id its path names."""
    body = unseal(data, MAGIC, VERSION, "retirement record", where)
    try:
        record = msgpack.unpackb(body, raw=False, strict_map_key=True)
        fields = (record["run"], record["id"], record["created"], record["checkpoints"], record["journal"])
        ok = record.get("format") == 1 and isinstance(fields[2], int) and all(isinstance(f, list) for f in fields[3:])
        if ok:
            check_name(fields[0])
            for checkpoint_id in [fields[1], *fields[3], *fields[4]]:
                check_id(checkpoint_id)
    except (ValueError, TypeError, KeyError, msgpack.UnpackException) as exc:
        raise FormatError(f"retirement record {where} is malformed: {exc}") from None
    if record.get("format") != 1:
        raise FormatError(f"retirement record {where} has record format {str(record.get('format'))[:20]}, this agentfs reads 1")
    if not ok or (fields[0], fields[1]) != (run, record_id):
        raise FormatError(f"retirement record {where} is malformed or names another run or id")
    return Retirement(*fields)
