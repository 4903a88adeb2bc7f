"""Format 2 segment files, bytes only (docs/FORMAT.md, "Format 2: segment files").

A segment is a header, then commit batches, then (once sealed) a footer index and a trailer:

    header  magic "\\x89AFSSEG\\n" | version u16 = 2 | slot u16 | segment id u64 | writer (16 bytes) | crc32
    frame   payload length u32 | crc32(length, kind, payload) u32 | kind u8 | payload
    batch   BEGIN frame | one frame per record | END frame
    footer  a FOOTER frame indexing every record in sections a reader uses in place (format/footer.py), then
    trailer magic "\\x89AFSEND\\n" | footer offset u64 | footer frame length u32 | crc32, at the end of the file

All integers are big-endian. The frame checksum is zlib's CRC-32: it is there to tell a torn or damaged
frame from an intact one, not to name content (records keep their sha256 identity, which the layer
above verifies on every read). CRC-32 catches every burst error up to 32 bits and any other damage with
probability 1 - 2^-32, where sha256 would cost a second hash of every byte written. It is computed by
ISA-L (isal_zlib.crc32, the same values as zlib.crc32): the stdlib's zlib 1.2 took 0.08 s of CPU over
a 256 MiB artifact's 182 MB of records (bodies no longer in cache when their batch is framed), ISA-L's
folding with carry-less multiplies 0.012 s.

A batch counts only when its BEGIN, every record frame and its END are intact, so a crash mid-append
never shows half a commit. A frame header of zeros ends the data: segments are preallocated
with zeros. BEGIN frames carry a magic, the segment id and their own offset, so a reader can find the
next batch after a damaged one, and a copy of segment bytes stored inside a record is never taken for
a batch of this segment at that place.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from typing import NamedTuple

from isal.isal_zlib import crc32

from ..errors import FormatError, IntegrityError, SerializationError
from . import codec, groups, kinds
from .crypto import SEALED_OVERHEAD
from .footer import FIRST_RECORD_KIND, Footer, IndexEntry, encode_footer

VERSION = 2
SEGMENT_MAGIC = b"\x89AFSSEG\n"
BATCH_MAGIC = b"\x89AFSBAT\n"
TRAILER_MAGIC = b"\x89AFSEND\n"
SUFFIX = ".seg"
SEAL_COPY_SUFFIX = ".seal"  # beside a sealed segment: its header and seal again, proving its length (FORMAT.md)
SNAPSHOT_SUFFIX = ".snap"  # beside an unsealed segment: a seal copy's bytes for its batches so far (FORMAT.md)

HEADER = struct.Struct(">8sHHQ16sI")  # magic, version, slot, segment id, writer, crc32 of what precedes it
FRAME = struct.Struct(">IIB")  # payload length, crc32, kind
_CHECKED = struct.Struct(">IB")  # the frame fields the crc32 covers before the payload
BEGIN = struct.Struct(">8sQQII")  # batch magic, segment id, offset of this frame, batch length, record count
END = struct.Struct(">QI")  # offset of the batch's BEGIN frame, record count
KEY_LENGTH = struct.Struct(">H")  # a record's payload: key length, key, body
KEYED_FRAME = struct.Struct(">IIBH")  # FRAME then KEY_LENGTH: the fixed head of a record's frame
TRAILER = struct.Struct(">8sQII")  # trailer magic, footer offset, footer frame length, crc32 of what precedes it

KIND_BEGIN, KIND_END, KIND_FOOTER = 1, 2, 3
BEGIN_FRAME = FRAME.size + BEGIN.size
END_FRAME = FRAME.size + END.size
MAX_KEY = 0xFFFF
ZERO_FRAME = bytes(FRAME.size)
# The largest body of a record that is not an object (an entry, a journal or retirement record): a writer
# refuses a larger one, a reader refuses a frame claiming more before reading it (and a remote's too).
MAX_RECORD_BODY = 64 << 20

Read = Callable[[int, int], bytes]  # (offset, length) -> the bytes there; fewer at the end of the file
# (a GROUP frame's key, its body, where) -> (kind, stored key) of each record it holds, authenticated and checked
# (crypto.Sealer.group_members); an encrypted store's scans index those records at the group's location
Expand = Callable[[bytes, bytes, str], list[tuple[int, bytes]]]


def max_record_frame(kind: int) -> int:
    """The longest frame a record of `kind` may have: its key (at most MAX_KEY bytes) and its body, at most
    codec.MAX_BLOB for an object, nothing for a fork, a group's largest plaintext for a group, MAX_RECORD_BODY
    else; sealed, 28 bytes more."""
    if kind == kinds.GROUP:
        return FRAME.size + KEY_LENGTH.size + groups.MAX_INNER + SEALED_OVERHEAD  # its key is empty
    body = codec.MAX_BLOB if kind == kinds.OBJECT else 0 if kind == kinds.FORK else MAX_RECORD_BODY
    return FRAME.size + KEY_LENGTH.size + MAX_KEY + body + SEALED_OVERHEAD


MAX_RECORD_FRAME = max(max_record_frame(kind) for kind in kinds.KNOWN)  # of any kind, for a reader that knows none


class Record(NamedTuple):
    kind: int
    key: bytes
    body: bytes


class SealedRecord(NamedTuple):
    """A record of an encrypted store as its writer appends it: the body as Sealer.seal made it (format/crypto.py;
    a large one sealed in place into a bytearray), not copied once more into a bytes object."""

    kind: int
    key: bytes
    body: bytes | bytearray


Frame = Record | SealedRecord  # a record as a writer appends it (batch_parts)


class Placed(NamedTuple):
    """Where a record of a batch lies among the batch's frames: frame number `frame` holds it (alone, or in a group)
    as (kind, key), its key as stored."""

    frame: int
    kind: int
    key: bytes


class Header(NamedTuple):
    segment_id: int
    slot: int
    writer: bytes


def segment_name(segment_id: int) -> str:
    return f"{segment_id:016x}{SUFFIX}"


def seal_copy_name(segment_id: int) -> str:
    return f"{segment_id:016x}{SEAL_COPY_SUFFIX}"


def segment_id_of(name: str) -> int | None:
    """The id a segment file name carries; None for a name that is not a segment's."""
    stem = name.removesuffix(SUFFIX)
    if stem == name or len(stem) != 16 or stem.strip("0123456789abcdef"):
        return None
    return int(stem, 16)


def encode_header(segment_id: int, slot: int, writer: bytes) -> bytes:
    fields = HEADER.pack(SEGMENT_MAGIC, VERSION, slot, segment_id, writer, 0)[:-4]
    return fields + struct.pack(">I", crc32(fields))


def decode_header(data: bytes, where: str) -> Header:
    if len(data) < HEADER.size or data[:8] != SEGMENT_MAGIC:
        raise FormatError(f"{where} is not an agentfs segment (no segment header)")
    _magic, version, slot, segment_id, writer, crc = HEADER.unpack_from(data)
    if crc32(data[: HEADER.size - 4]) != crc:
        raise IntegrityError(f"{where}: the segment header does not match its checksum (corrupt)")
    if version != VERSION:
        raise FormatError(f"{where} has segment format version {version}; this agentfs reads {VERSION}")
    return Header(segment_id, slot, writer)


def encode_frame(kind: int, payload: bytes) -> bytes:
    checked = _CHECKED.pack(len(payload), kind)
    return FRAME.pack(len(payload), crc32(payload, crc32(checked)), kind) + payload


def decode_frame(data: bytes | memoryview, where: str) -> tuple[int, bytes]:
    """(kind, payload) of the frame `data` holds exactly, refused unless whole and unaltered."""
    if len(data) < FRAME.size:
        raise IntegrityError(f"{where}: a frame is cut short ({len(data)} bytes)")
    length, crc, kind = FRAME.unpack_from(data)
    if FRAME.size + length != len(data):
        raise IntegrityError(f"{where}: a frame says {length} payload bytes where {len(data) - FRAME.size} lie")
    payload = bytes(data[FRAME.size :])
    if crc32(payload, crc32(_CHECKED.pack(length, kind))) != crc:
        raise IntegrityError(f"{where}: a frame does not match its checksum (torn or corrupt)")
    return kind, payload


def frame_length(data: bytes | memoryview) -> int:
    """The whole length of the frame whose header `data` starts with (unchecked)."""
    return FRAME.size + int(FRAME.unpack_from(data)[0])


def encode_batch(segment_id: int, offset: int, records: Sequence[Frame]) -> tuple[bytes, list[IndexEntry]]:
    """The bytes of one commit batch to append at `offset`, and where each record lands."""
    parts, entries = batch_parts(segment_id, offset, records)
    return b"".join(parts), entries


def batch_parts(segment_id: int, offset: int, records: Sequence[Frame]) -> tuple[list[bytes | bytearray], list[IndexEntry]]:
    """encode_batch's bytes as pieces that join into them, each record's body among them uncopied."""
    parts: list[bytes | bytearray] = [b""]  # parts[0]: the BEGIN frame, which needs the batch's length
    entries = []
    position = offset + BEGIN_FRAME
    for record in records:
        if not FIRST_RECORD_KIND <= record.kind <= 0xFF:
            raise FormatError(f"record kind {record.kind} is outside {FIRST_RECORD_KIND}..255")
        if len(record.key) > MAX_KEY:
            raise FormatError(f"record key of {len(record.key)} bytes is longer than {MAX_KEY}")
        head = KEY_LENGTH.pack(len(record.key)) + record.key
        length = len(head) + len(record.body)
        if FRAME.size + length > max_record_frame(record.kind):  # every reader would refuse it
            name = kinds.NAMES.get(record.kind, f"kind {record.kind}")
            raise SerializationError(f"{name} record of {len(record.body)} bytes: over the format's largest ({MAX_RECORD_BODY})")
        crc = crc32(record.body, crc32(head, crc32(_CHECKED.pack(length, record.kind))))  # encode_frame's, in pieces
        parts += [FRAME.pack(length, crc, record.kind), head, record.body]
        entries.append(IndexEntry(record.kind, record.key, position, FRAME.size + length))
        position += FRAME.size + length
    length = position + END_FRAME - offset
    parts[0] = encode_frame(KIND_BEGIN, BEGIN.pack(BATCH_MAGIC, segment_id, offset, length, len(records)))
    parts.append(encode_frame(KIND_END, END.pack(offset, len(records))))
    return parts, entries


def batch_length(data: bytes | memoryview, segment_id: int, offset: int) -> int | None:
    """The length of the batch whose intact BEGIN frame for (segment_id, offset) `data` starts with; else None."""
    if len(data) < BEGIN_FRAME:
        return None
    try:
        kind, payload = decode_frame(data[:BEGIN_FRAME], "")
    except IntegrityError:
        return None
    if kind != KIND_BEGIN:
        return None
    magic, segment, at, length, _count = BEGIN.unpack(payload)
    if magic != BATCH_MAGIC or segment != segment_id or at != offset or length < BEGIN_FRAME + END_FRAME:
        return None
    return int(length)


def decode_batch(
    read: Read, segment_id: int, offset: int, where: str, expand: Expand | None = None, *, length: int | None = None
) -> list[IndexEntry]:
    """The records of the batch at `offset`, read a frame at a time through `read`; IntegrityError unless all
    of it is intact. Each record frame's claimed length is checked against its kind's largest
    (max_record_frame) and the batch's end before the frame is read: a crafted length allocates nothing.
    With `expand` (an encrypted store's), a GROUP frame gives an entry per record it holds, at its own
    location; a group that does not open makes the batch damaged (its AgentFSError). `length`: what
    batch_length() found in the same BEGIN frame, which the caller read and checked (a scan: not twice)."""
    head = read(offset, BEGIN_FRAME)
    if length is None:
        length = batch_length(head, segment_id, offset)
    if length is None:
        raise IntegrityError(f"{where} offset {offset}: no intact batch start")
    count = BEGIN.unpack_from(head, FRAME.size)[4]
    end = offset + length - END_FRAME  # where the END frame lies
    entries, position = [], offset + BEGIN_FRAME
    for _ in range(count):  # error text is made only for an error: a scan meets thousands of sound frames
        frame_head = read(position, FRAME.size)
        if position + FRAME.size > end or len(frame_head) < FRAME.size:
            raise IntegrityError(f"{where} offset {position}: the batch ends before its {count} records")
        payload_length, crc, kind = FRAME.unpack_from(frame_head)
        size = FRAME.size + payload_length
        if kind < FIRST_RECORD_KIND:
            raise FormatError(f"{where} offset {position}: a record frame of kind {kind} is malformed")
        if size > max_record_frame(kind) or position + size > end:
            limit = f"the largest {kinds.NAMES.get(kind, f'kind {kind}')} record ({max_record_frame(kind)})"
            over = limit if position + size <= end else "its batch"
            raise IntegrityError(f"{where} offset {position}: a record frame claims {size} bytes, over {over}")
        frame = read(position, size)
        # decode_frame's checks, the payload not copied: whole, and matching its checksum
        if len(frame) != size:
            lie = len(frame) - FRAME.size
            raise IntegrityError(f"{where} offset {position}: a frame says {payload_length} payload bytes where {lie} lie")
        if crc32(memoryview(frame)[FRAME.size :], crc32(_CHECKED.pack(payload_length, kind))) != crc:
            raise IntegrityError(f"{where} offset {position}: a frame does not match its checksum (torn or corrupt)")
        key_length = KEY_LENGTH.unpack_from(frame, FRAME.size)[0] if payload_length >= KEY_LENGTH.size else MAX_KEY + 1
        key_end = KEYED_FRAME.size + key_length
        if key_end > size:
            raise FormatError(f"{where} offset {position}: a record frame of kind {kind} is malformed")
        key = bytes(frame[KEYED_FRAME.size : key_end])
        if kind == kinds.GROUP and expand is not None:
            members = expand(key, bytes(frame[key_end:]), f"{where} offset {position}")
            entries += [IndexEntry(inner, stored, position, size) for inner, stored in members]
        else:
            entries.append(IndexEntry(kind, key, position, size))
        position += size
    if position != end:
        raise IntegrityError(f"{where} offset {position}: the batch's records overrun its end frame")
    kind, payload = decode_frame(read(end, END_FRAME), f"{where} offset {end}")
    if kind != KIND_END or END.unpack(payload) != (offset, count):
        raise IntegrityError(f"{where} offset {end}: the batch's end frame does not close it")
    return entries


def ends_batch(read: Read, offset: int, length: int) -> bool:
    """Whether the batch at `offset` (its BEGIN frame intact, stating `length`) ends in its intact END frame.

    A torn append leaves a prefix of the batch; an intact END frame at the stated length means the
    whole batch was written and then damaged.
    """
    count = BEGIN.unpack_from(read(offset, BEGIN_FRAME), FRAME.size)[4]
    try:
        kind, payload = decode_frame(read(offset + length - END_FRAME, END_FRAME), "")
    except IntegrityError:
        return False
    return kind == KIND_END and END.unpack(payload) == (offset, count)


def batch_ends_at(read: Read, segment_id: int, end: int) -> bool:
    """Whether a batch of segment `segment_id` ends exactly at `end`: an intact END frame just before it,
    naming an intact BEGIN frame that states the length up to `end` (an index snapshot's check, FORMAT.md)."""
    if end < HEADER.size + BEGIN_FRAME + END_FRAME:
        return False
    try:
        kind, payload = decode_frame(read(end - END_FRAME, END_FRAME), "")
    except IntegrityError:
        return False
    if kind != KIND_END or len(payload) != END.size:
        return False
    offset = END.unpack(payload)[0]
    if not HEADER.size <= offset < end:
        return False
    return batch_length(read(offset, BEGIN_FRAME), segment_id, offset) == end - offset and ends_batch(read, offset, end - offset)


def record_overhead(key_length: int) -> int:
    """The bytes a record's frame adds to its body: the frame header, the key length and the key."""
    return FRAME.size + KEY_LENGTH.size + key_length


def decode_record(data: bytes | memoryview, where: str) -> Record:
    """The record in the frame `data` holds exactly, refused unless whole and unaltered."""
    kind, payload = decode_frame(data, where)
    if kind < FIRST_RECORD_KIND or len(payload) < KEY_LENGTH.size:
        raise FormatError(f"{where}: not a record frame (kind {kind})")
    key_end = KEY_LENGTH.size + KEY_LENGTH.unpack_from(payload)[0]
    if key_end > len(payload):
        raise FormatError(f"{where}: a record's key runs past its frame")
    return Record(kind, payload[KEY_LENGTH.size : key_end], payload[key_end:])


def record_body_unchecked(data: bytes, kind: int, key: bytes, where: str) -> memoryview:
    """The body of the record (kind, key) whose frame `data` holds exactly, the frame's crc32 not computed:
    for a caller that checks every byte of the body as strongly (an object's sha256 of its decompressed
    body). The frame's length, kind and key are compared here; IntegrityError if it is not that record's."""
    body = KEYED_FRAME.size + len(key)
    if len(data) < body:
        raise IntegrityError(f"{where}: a frame is cut short ({len(data)} bytes)")
    length, _crc, found_kind, key_length = KEYED_FRAME.unpack_from(data)
    if FRAME.size + length != len(data) or found_kind != kind or key_length != len(key) or data[KEYED_FRAME.size : body] != key:
        raise IntegrityError(f"{where}: the frame there is not record {key.hex()} of kind {kind}")
    return memoryview(data)[body:]


def find_batch_magic(data: bytes, start: int) -> int:
    """The offset in `data`, from `start`, where a BEGIN frame holding the batch magic would start; -1 if none."""
    found = data.find(BATCH_MAGIC, start + FRAME.size)
    return -1 if found < 0 else found - FRAME.size


def encode_seal(segment_id: int, offset: int, entries: Sequence[IndexEntry]) -> bytes:
    """The footer frame and trailer that seal a segment whose batches end at `offset`."""
    return seal_of(offset, encode_footer(segment_id, entries))


def seal_of(offset: int, payload: bytes) -> bytes:
    """The footer frame holding the footer `payload` and the trailer, for batches ending at `offset` (encode_seal)."""
    footer = encode_frame(KIND_FOOTER, payload)
    fields = TRAILER.pack(TRAILER_MAGIC, offset, len(footer), 0)[:-4]
    return footer + fields + struct.pack(">I", crc32(fields))


def decode_trailer(data: bytes, file_size: int) -> tuple[int, int] | None:
    """(footer offset, footer frame length) from the last TRAILER.size bytes of a sealed segment; None if unsealed."""
    if len(data) != TRAILER.size or data[:8] != TRAILER_MAGIC:
        return None
    _magic, offset, length, crc = TRAILER.unpack(data)
    if crc32(data[:-4]) != crc or offset + length + TRAILER.size != file_size or offset < HEADER.size:
        return None
    return int(offset), int(length)


def read_footer(data: bytes, segment_id: int, footer_offset: int, where: str) -> Footer:
    """The footer a sealed segment's footer frame holds, its head, run table and others checked; its rows
    are read in place (format/footer.py). Every record it names must lie between the header and the footer."""
    kind, payload = decode_frame(data, f"{where} footer")
    if kind != KIND_FOOTER:
        raise FormatError(f"{where}: the trailer does not point at a footer")
    return Footer(payload, segment_id, HEADER.size, footer_offset, where)


def decode_footer(data: bytes, segment_id: int, footer_offset: int, where: str) -> list[IndexEntry]:
    """Every record a sealed segment's footer frame indexes, by offset, all of it checked."""
    return read_footer(data, segment_id, footer_offset, where).entries()


class SealCopy(NamedTuple):
    """What a seal copy proves about its sealed segment: whose it is, its length, and its footer frame."""

    header: Header
    footer_offset: int
    footer_frame: bytes

    @property
    def length(self) -> int:
        """The sealed segment's whole length: its data, its footer and its trailer."""
        return self.footer_offset + len(self.footer_frame) + TRAILER.size


def encode_seal_copy(header: bytes, seal: bytes) -> bytes:
    """A seal copy: the sealed segment's header bytes, then its footer frame and trailer (encode_seal's bytes)."""
    return header + seal


def decode_seal_copy(data: bytes, where: str) -> SealCopy:
    """The seal copy `data` holds, its header and trailer checked (its footer frame is checked as a segment's is)."""
    header = decode_header(data[: HEADER.size], where)
    trailer = data[-TRAILER.size :] if len(data) >= HEADER.size + TRAILER.size else b""
    if len(trailer) != TRAILER.size or trailer[:8] != TRAILER_MAGIC or crc32(trailer[:-4]) != TRAILER.unpack(trailer)[3]:
        raise IntegrityError(f"{where}: the seal copy has no intact trailer (torn or corrupt)")
    _magic, offset, length, _crc = TRAILER.unpack(trailer)
    if HEADER.size + length + TRAILER.size != len(data) or offset < HEADER.size:
        raise IntegrityError(f"{where}: the seal copy's trailer does not match its length (torn or corrupt)")
    return SealCopy(header, int(offset), data[HEADER.size : HEADER.size + length])
