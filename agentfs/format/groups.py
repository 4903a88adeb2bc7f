"""A GROUP record's plaintext: several small records sealed as one (docs/FORMAT.md, "Groups of records").

An encrypted store seals a commit's small records together, so that one nonce, one tag and one frame
serve them all, and their keys inside name runs by their plain names (a stored run name is some 40 bytes
longer). Bytes only; sealing and opening are format/crypto.py's.

    inner   count u16 | per member: kind u8 | key length u16 | key | body length u32 | body

A member's key is its plain key (an oid; run NUL id; source NUL target) and its body what a plaintext
store holds for that record. Readers check everything against fixed limits before using any of it.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import NamedTuple

from ..errors import AgentFSError, FormatError
from . import codec, kinds

COUNT = struct.Struct(">H")
MEMBER_HEAD = struct.Struct(">BH")  # kind, key length; then the key
BODY_LENGTH = struct.Struct(">I")
MEMBER_KINDS = frozenset((kinds.OBJECT, kinds.ENTRY, kinds.JOURNAL, kinds.RETIRED, kinds.FORK))
SMALL_MEMBER = 16 << 10  # bytes: a record whose body is at most this is grouped by a writer; larger ones are sealed alone
GROUP_TARGET = 64 << 10  # bytes: a writer starts another group rather than grow one's plaintext past this
MAX_INNER = 1 << 20  # bytes: the largest plaintext a reader accepts (a writer makes at most GROUP_TARGET + SMALL_MEMBER)
MAX_MEMBERS = 0xFFFF


class Member(NamedTuple):
    """One record inside a group: its kind, plain key and plaintext body."""

    kind: int
    key: bytes
    body: bytes


def member_size(key: bytes, body: bytes | memoryview) -> int:
    """The bytes a member takes in a group's plaintext."""
    return MEMBER_HEAD.size + len(key) + BODY_LENGTH.size + len(body)


def plan(sizes: Sequence[int]) -> list[list[int]]:
    """Which records (by index, given each one's member_size, or -1 for a record not to group) go together:
    groups of at most GROUP_TARGET bytes of plaintext (one member alone may pass it), in the records' order."""
    groups: list[list[int]] = []
    used = GROUP_TARGET + 1
    for index, size in enumerate(sizes):
        if size < 0:
            continue
        if used + size > GROUP_TARGET or len(groups[-1]) == MAX_MEMBERS:
            groups.append([])
            used = COUNT.size
        groups[-1].append(index)
        used += size
    return groups


def encode_inner(members: Sequence[tuple[int, bytes, bytes]]) -> bytes:
    """The plaintext of a group of `members`, each (kind, plain key, body): a Member, or a writer's record as it is."""
    parts = [COUNT.pack(len(members))]
    for kind, key, body in members:
        parts += [MEMBER_HEAD.pack(kind, len(key)), key, BODY_LENGTH.pack(len(body)), body]
    return b"".join(parts)


def decode_inner(data: bytes, where: str) -> list[Member]:
    """The members of an authenticated group's plaintext, each checked: a known kind, a key of its kind's grammar,
    lengths inside the plaintext, a body no longer than its kind allows; FormatError naming `where` else."""
    if len(data) > MAX_INNER:
        raise FormatError(f"{where}: a group of records holds {len(data)} bytes, over the largest ({MAX_INNER})")
    if len(data) < COUNT.size:
        raise FormatError(f"{where}: a group of records is cut short ({len(data)} bytes)")
    (count,) = COUNT.unpack_from(data)
    if count == 0:
        raise FormatError(f"{where}: a group of records holds no record")
    members, position = [], COUNT.size
    for number in range(count):
        at = f"{where}: record {number} of its group"
        if position + MEMBER_HEAD.size > len(data):
            raise FormatError(f"{at} runs past the group's end")
        kind, key_length = MEMBER_HEAD.unpack_from(data, position)
        position += MEMBER_HEAD.size
        if kind not in MEMBER_KINDS:
            raise FormatError(f"{at} has kind {kind}, not one a group may hold")
        if position + key_length + BODY_LENGTH.size > len(data):
            raise FormatError(f"{at}: its key runs past the group's end")
        key = data[position : position + key_length]
        position += key_length
        (body_length,) = BODY_LENGTH.unpack_from(data, position)
        position += BODY_LENGTH.size
        if position + body_length > len(data):
            raise FormatError(f"{at}: its body of {body_length} bytes runs past the group's end")
        largest = codec.MAX_BLOB if kind == kinds.OBJECT else 0 if kind == kinds.FORK else MAX_INNER
        if body_length > largest:
            raise FormatError(f"{at}: a {kinds.NAMES[kind]} body of {body_length} bytes, over its largest ({largest})")
        _check_key(kind, key, at)
        members.append(Member(kind, key, data[position : position + body_length]))
        position += body_length
    if position != len(data):
        raise FormatError(f"{where}: {len(data) - position} bytes follow the last record of a group")
    return members


def _check_key(kind: int, key: bytes, where: str) -> None:
    try:
        if kind == kinds.OBJECT:
            kinds.check_object_key(key, where)
        else:
            kinds.split_run_key(key, where, second="run" if kind == kinds.FORK else "id")
    except AgentFSError as exc:
        raise FormatError(str(exc)) from None
