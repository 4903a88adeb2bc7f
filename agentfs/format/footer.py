"""A sealed segment's footer payload (docs/FORMAT.md, "Footer"): sections a reader uses in place.

    head     segment id u64 | object rows u32 | run sections u32 | other entries u32
    objects  object rows of 44 bytes: oid (32) | frame offset u64 | frame length u32, sorted
    runs     run sections: kind u8 | run name length u16 | row count u32 | run name, sorted by (kind, name)
    rows     for each run section in that order, its rows of 38 bytes: record id (26) | frame offset u64
             | frame length u32, sorted
    others   entries: kind u8 | key length u16 | frame offset u64 | frame length u32 | key, by offset

Rows sort as bytes, so by key, then offset (big-endian): every copy of a key lies in adjacent rows. An
object row holds an OBJECT record whose key is 32 bytes; a run row an ENTRY, JOURNAL or RETIRED record
whose key is a valid run name, NUL and a ULID; every other record (FORK, kinds of a newer writer,
malformed keys) is an other entry, so a reader finds and reports malformed keys by reading the others.

`Footer` is the one decoder: it reads the head, the run table and the others when made (what a
segment costs at open: its runs, not its records), finds a key's rows by bisection, and decodes all of
a section only when asked. A row a lookup reads is checked then (IntegrityError naming the segment):
the frame checksum of the footer covered it, so a bad row means a writer that wrote it so.
"""

from __future__ import annotations

import re
import struct
from collections.abc import Container, Iterable
from typing import NamedTuple

from ..errors import FormatError, IntegrityError, InvalidName
from ..names import ID, check_name
from . import kinds

HEAD = struct.Struct(">QIII")  # segment id, object rows, run sections, other entries
OBJECT_ROW = struct.Struct(">32sQI")  # oid, frame offset, frame length
RUN_SECTION = struct.Struct(">BHI")  # kind, run name length, row count; then the run name
ID_LENGTH = 26  # a ULID's characters (names.ID)
RUN_ROW = struct.Struct(f">{ID_LENGTH}sQI")  # record id, frame offset, frame length
OTHER = struct.Struct(">BHQI")  # kind, key length, frame offset, frame length; then the key
FIRST_RECORD_KIND = 16  # record kinds are 16..255 (segment frames below that are the format's own)
ROW_IDS = re.compile(f"([\\x00-\\xff]{{{ID_LENGTH}}})[\\x00-\\xff]{{{RUN_ROW.size - ID_LENGTH}}}")  # each row's id, bytes as latin-1
ID_ALPHABET = bytes(c for c in range(128) if ID.fullmatch(chr(c) * ID_LENGTH))  # names.ID takes any of them anywhere


class IndexEntry(NamedTuple):
    """What a record is and where its frame lies in its segment."""

    kind: int
    key: bytes
    offset: int
    length: int


class Section(NamedTuple):
    start: int  # where its first row lies in the payload
    row_count: int


def encode_footer(segment_id: int, entries: Iterable[IndexEntry]) -> bytes:
    """The footer payload indexing `entries`, in any order."""
    rows = FooterRows()
    rows.add(entries)
    return rows.encode(segment_id)


class FooterRows:
    """A footer's rows, gathered as records are appended and kept sorted between encodings: encoding again after more
    appends costs packing the new rows, a sort of mostly sorted lists and a join (a writer's index snapshots of a
    growing segment, FORMAT.md "Index snapshots"), not every row again. The one encoder of a footer (encode_footer)."""

    def __init__(self) -> None:
        self.objects: list[bytes] = []
        self.rows: dict[tuple[int, bytes], list[bytes]] = {}
        self.others: list[IndexEntry] = []
        self._valid_runs: set[str] = set()

    def add(self, entries: Iterable[IndexEntry]) -> None:
        for entry in entries:
            if entry.kind == kinds.OBJECT and len(entry.key) == kinds.OID_LENGTH:
                self.objects.append(OBJECT_ROW.pack(entry.key, entry.offset, entry.length))
                continue
            if entry.kind in kinds.RUN_KINDS:
                try:
                    run, record_id = kinds.split_run_key(entry.key, "", checked=self._valid_runs)
                except (FormatError, InvalidName):
                    pass  # malformed: an other entry, which a reader reports
                else:
                    self.rows.setdefault((entry.kind, run.encode()), []).append(
                        RUN_ROW.pack(record_id.encode(), entry.offset, entry.length)
                    )
                    continue
            self.others.append(entry)

    def encode(self, segment_id: int) -> bytes:
        """The footer payload of every row added so far."""
        self.objects.sort()  # in place: the next sort meets a sorted run and the rows added since (timsort's best case)
        sections = sorted(self.rows)
        for section in sections:
            self.rows[section].sort()
        self.others.sort(key=lambda entry: entry.offset)
        parts = [HEAD.pack(segment_id, len(self.objects), len(sections), len(self.others)), *self.objects]
        parts += [RUN_SECTION.pack(kind, len(run), len(self.rows[kind, run])) + run for kind, run in sections]
        for section in sections:
            parts += self.rows[section]
        for entry in self.others:
            parts += [OTHER.pack(entry.kind, len(entry.key), entry.offset, entry.length), entry.key]
        return b"".join(parts)


def _is_run_name(name: bytes) -> bool:
    try:
        check_name(name.decode())
    except (InvalidName, UnicodeDecodeError):
        return False
    return True


class Footer:
    """A footer payload read in place; `where` (the segment's path) names it in errors. Not thread-safe."""

    def __init__(self, payload: bytes, segment_id: int, data_start: int, data_end: int, where: str) -> None:
        if len(payload) < HEAD.size:
            raise FormatError(f"{where}: the footer is cut short ({len(payload)} bytes)")
        segment, object_rows, sections, others = HEAD.unpack_from(payload)
        if segment != segment_id:
            raise FormatError(f"{where}: the footer is segment {segment}'s, not {segment_id}'s")
        self.payload, self.where = payload, where
        self.data_start, self.data_end = data_start, data_end  # every record frame lies between them
        self.rows_read = 0  # rows decoded so far: what lookups cost
        self.objects = Section(HEAD.size, object_rows)
        position = HEAD.size + object_rows * OBJECT_ROW.size
        table: list[tuple[int, bytes, int]] = []
        for _ in range(sections):
            if position + RUN_SECTION.size > len(payload):
                raise FormatError(f"{where}: the footer ends before its {sections} run sections")
            kind, length, count = RUN_SECTION.unpack_from(payload, position)
            run = payload[position + RUN_SECTION.size : position + RUN_SECTION.size + length]
            position += RUN_SECTION.size + length
            if kind not in kinds.RUN_KINDS or not count or len(run) != length or not _is_run_name(run):
                raise FormatError(f"{where}: the footer's run section {run[:80]!r} of kind {kind} is malformed")
            if table and (kind, run) <= table[-1][:2]:
                raise FormatError(f"{where}: the footer's run sections are out of order at {run[:80]!r}")
            table.append((kind, run, count))
        self.runs: dict[tuple[int, str], Section] = {}
        for kind, run, count in table:
            self.runs[kind, run.decode()] = Section(position, count)
            position += count * RUN_ROW.size
        self.others: list[IndexEntry] = []
        for _ in range(others):
            if position + OTHER.size > len(payload):
                raise FormatError(f"{where}: the footer ends before its {others} other entries")
            kind, key_length, offset, length = OTHER.unpack_from(payload, position)
            key = payload[position + OTHER.size : position + OTHER.size + key_length]
            position += OTHER.size + key_length
            if len(key) != key_length or kind < FIRST_RECORD_KIND or not data_start <= offset <= data_end - length:
                raise FormatError(f"{where}: footer entry at offset {offset} is malformed")
            self.others.append(IndexEntry(kind, key, offset, length))
        if position != len(payload):
            raise FormatError(f"{where}: the footer's sections take {position} bytes where {len(payload)} lie")
        self._ids: dict[tuple[int, str], list[str]] = {}

    # lookups: a few rows each

    def find_object(self, oid: bytes) -> list[tuple[int, int]]:
        """(offset, length) of every copy of the object in this segment."""
        return self._find(self.objects, OBJECT_ROW, oid)

    def find_record(self, kind: int, run: str, record_id: str) -> list[tuple[int, int]]:
        """(offset, length) of every copy of the run record in this segment."""
        section = self.runs.get((kind, run))
        return [] if section is None else self._find(section, RUN_ROW, record_id.encode())

    def _find(self, section: Section, row: struct.Struct, key: bytes) -> list[tuple[int, int]]:
        payload, width, size, start = self.payload, len(key), row.size, section.start
        low, high = 0, section.row_count
        probes = 0
        while low < high:  # the first row whose key is not below `key`
            middle = (low + high) // 2
            at = start + middle * size
            probes += 1
            if payload[at : at + width] < key:
                low = middle + 1
            else:
                high = middle
        found = []
        for number in range(low, section.row_count):
            probes += 1
            found_key, offset, length = row.unpack_from(payload, start + number * size)
            if found_key != key:
                break
            found.append(self._checked(offset, length))
        self.rows_read += probes
        return found

    def newest(self, kind: int, run: str, hidden: Container[str]) -> str | None:
        """The greatest id of the run's records here that `hidden` does not hold: rows walked back from the last."""
        section = self.runs.get((kind, run))
        if section is None:
            return None
        for number in range(section.row_count - 1, -1, -1):
            self.rows_read += 1
            record_id = self._row_id(RUN_ROW.unpack_from(self.payload, section.start + number * RUN_ROW.size)[0])
            if record_id not in hidden:
                return record_id
        return None

    def _row_id(self, raw: bytes) -> str:
        if raw.translate(None, ID_ALPHABET):
            raise IntegrityError(f"{self.where}: a footer row holds {raw!r}, not a ULID (damaged footer)")
        return raw.decode()

    def _checked(self, offset: int, length: int) -> tuple[int, int]:
        if not self.data_start <= offset <= self.data_end - length:
            raise IntegrityError(f"{self.where}: a footer row names offset {offset}, outside the segment's records (damaged footer)")
        return offset, length

    # whole sections

    def rows(self, kind: int, run: str) -> list[tuple[str, int, int]]:
        """(id, offset, length) of each of the run's records of `kind` here, sorted, each checked."""
        section = self.runs.get((kind, run))
        return [] if section is None else [(raw.decode(), offset, length) for raw, offset, length in self._rows(section, RUN_ROW)]

    def ids(self, kind: int, run: str) -> list[str]:
        """The run's record ids here, sorted, each once; kept (a section is decoded once). Only the ids are
        checked: what a caller locates, `find_record` checks."""
        ids = self._ids.get((kind, run))
        if ids is None:
            section = self.runs.get((kind, run))
            rows = b"" if section is None else self.payload[section.start : section.start + section.row_count * RUN_ROW.size]
            self.rows_read += len(rows) // RUN_ROW.size
            found = ROW_IDS.findall(rows.decode("latin-1"))  # one pass in C: a run page's first look at 100,000 rows
            if "".join(found).encode("latin-1").translate(None, ID_ALPHABET):
                raise IntegrityError(f"{self.where}: a footer row of {run!r} holds no ULID (damaged footer)")
            ids = self._ids[kind, run] = list(dict.fromkeys(found))
        return ids

    def object_rows(self) -> list[tuple[bytes, int, int]]:
        """(oid, offset, length) of every object row, sorted; each checked."""
        return self._rows(self.objects, OBJECT_ROW)

    def _rows(self, section: Section, row: struct.Struct) -> list[tuple[bytes, int, int]]:
        """Every row of a section, checked as a whole (sorted, ids well formed, frames inside the segment)."""
        rows = list(row.iter_unpack(self.payload[section.start : section.start + section.row_count * row.size]))
        self.rows_read += len(rows)
        keys = [key for key, _offset, _length in rows]
        if rows and (
            rows != sorted(rows)
            or (row is RUN_ROW and b"".join(keys).translate(None, ID_ALPHABET))
            or min(offset for _key, offset, _length in rows) < self.data_start
            or max(offset + length for _key, offset, length in rows) > self.data_end
        ):
            raise IntegrityError(f"{self.where}: a footer section is out of order or names a frame outside the segment (damaged footer)")
        return rows

    def entries(self) -> list[IndexEntry]:
        """Every record the footer indexes, by offset; IntegrityError if any row is damaged."""
        found = [IndexEntry(kinds.OBJECT, oid, offset, length) for oid, offset, length in self.object_rows()]
        for (kind, run), section in self.runs.items():
            prefix = run.encode() + b"\0"
            found += [IndexEntry(kind, prefix + record_id, offset, length) for record_id, offset, length in self._rows(section, RUN_ROW)]
        found += self.others
        found.sort(key=lambda entry: entry.offset)
        return found
