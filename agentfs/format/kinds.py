"""What a format-2 segment stores: the record kinds and how their keys are made (docs/FORMAT.md).

A segment frame's record is (kind, key, body) (format/segment.py). The bodies are the bytes format 1
kept in files, unchanged: an object's sealed blob, a log entry, a journal or retirement record.

    kind      key                          body
    OBJECT    oid (32 bytes, sha256)       the object's blob (codec.encode of its bytes)
    ENTRY     run NUL checkpoint id        the checkpoint's log entry (format/entries.py)
    JOURNAL   run NUL record id            a journal record (format/journal.py)
    RETIRED   run NUL record id            a retirement record (format/retirement.py)
    FORK      source run NUL target run    empty: `target` may borrow from `source`
    GROUP     empty                        records sealed together (encrypted stores only, format/groups.py)
    LINEAGE   run NUL ULID (fresh)         the run's lineage in its segment, written at the seal (format/lineage.py)

Run names, checkpoint ids and record ids never hold NUL (names.py, ids.py), so a key splits at
its first NUL. A key may appear more than once (two writers deduplicating the same object, a
repaired entry): every copy holds the same content, and a reader takes any intact one.
"""

from __future__ import annotations

from ..errors import FormatError, InvalidName
from ..names import ID, check_name
from .keys import JOURNAL_RECORDS, LOG_RECORDS, RETIRED_RECORDS

OBJECT, ENTRY, JOURNAL, RETIRED, FORK = 16, 17, 18, 19, 20
GROUP = 21  # an encrypted store's small records of one batch sealed together (format/groups.py); key empty
LINEAGE = 22  # a hint: which of a run's entries in a sealed segment no other there names as parent (format/lineage.py)
RUN_KINDS = (ENTRY, JOURNAL, RETIRED)  # keyed by run and id, with rows in a footer's run sections
KNOWN = frozenset((OBJECT, ENTRY, JOURNAL, RETIRED, FORK, LINEAGE))
NAMES = {OBJECT: "object", ENTRY: "entry", JOURNAL: "journal", RETIRED: "retired", FORK: "fork", GROUP: "group", LINEAGE: "lineage"}
OID_LENGTH = 32
KIND_OF = {LOG_RECORDS: ENTRY, JOURNAL_RECORDS: JOURNAL, RETIRED_RECORDS: RETIRED}  # the engine API's record names -> kinds


def pair_key(first: str, second: str) -> bytes:
    """The key of an ENTRY, JOURNAL or RETIRED record (run, id) or of a FORK record (source, target)."""
    return f"{first}\0{second}".encode()


def split_pair_key(key: bytes, where: str) -> tuple[str, str]:
    first, nul, second = key.partition(b"\0")
    if not nul or not first or not second:
        raise FormatError(f"{where}: record key {key[:80]!r} is not two names joined by NUL")
    try:
        return first.decode(), second.decode()
    except UnicodeDecodeError:
        raise FormatError(f"{where}: record key {key[:80]!r} is not UTF-8") from None


def split_run_key(key: bytes, where: str, second: str = "id", checked: set[str] | None = None) -> tuple[str, str]:
    """(run, id) of an ENTRY, JOURNAL or RETIRED key, or (source, target) of a FORK key, checked.

    `checked`: run names already found valid, skipped (a run's name repeats in every record of it);
    the first name of each key found valid is added."""
    first, other = split_pair_key(key, where)
    try:
        if checked is None or first not in checked:
            check_name(first)
        if second == "run":
            check_name(other)
        elif not ID.fullmatch(other):
            raise InvalidName(f"{other!r} is not a ULID")
    except InvalidName as exc:
        raise InvalidName(f"{where}: record key {key[:80]!r}: {exc}") from None
    if checked is not None:
        checked.add(first)
    return first, other


def check_object_key(key: bytes, where: str) -> bytes:
    if len(key) != OID_LENGTH:
        raise FormatError(f"{where}: an object record's key is {len(key)} bytes, not {OID_LENGTH}")
    return key
