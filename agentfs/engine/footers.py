"""The sealed segments an index reads through their footers, in place (format/footer.py).

A lookup bisects the rows of each footer, oldest segment first: a few rows per sealed segment, whatever
the number of records. Not thread-safe (the index holds its lock around every call).
"""

from __future__ import annotations

from collections.abc import Container

from ..format import kinds
from ..format import segment as fmt
from ..format.crypto import Sealer
from .segments import FrameLocation


class Footers(dict[int, fmt.Footer]):
    """Segment id -> its footer, oldest first. Takes and returns run names; with a `sealer` (an encrypted
    store) the footers hold the runs' stored names (format/crypto.py), translated here."""

    def __init__(self, sealer: Sealer | None = None) -> None:
        super().__init__()
        self.sealer = sealer

    def _stored(self, run: str) -> str:
        return run if self.sealer is None else self.sealer.stored_run(run)

    def objects(self, oid: bytes) -> list[FrameLocation]:
        """Every copy of the object in these segments."""
        return [FrameLocation(segment_id, *row) for segment_id, footer in self.items() for row in footer.find_object(oid)]

    def first_object(self, oid: bytes) -> FrameLocation | None:
        for segment_id, footer in self.items():
            rows = footer.find_object(oid)
            if rows:
                return FrameLocation(segment_id, *rows[0])
        return None

    def records(self, kind: int, run: str, record_id: str) -> list[FrameLocation]:
        """Every copy of the run record in these segments."""
        run = self._stored(run)
        return [FrameLocation(segment_id, *row) for segment_id, footer in self.items() for row in footer.find_record(kind, run, record_id)]

    def first_record(self, kind: int, run: str, record_id: str) -> FrameLocation | None:
        run = self._stored(run)
        for segment_id, footer in self.items():
            rows = footer.find_record(kind, run, record_id)
            if rows:
                return FrameLocation(segment_id, *rows[0])
        return None

    def _holding(self, kind: int, stored: str) -> list[fmt.Footer]:
        return [footer for footer in self.values() if (kind, stored) in footer.runs]

    def newest(self, kind: int, run: str, hidden: Container[str]) -> str | None:
        """The run's greatest id of `kind` in these segments that `hidden` does not hold."""
        stored = self._stored(run)
        found = [newest for footer in self._holding(kind, stored) if (newest := footer.newest(kind, stored, hidden)) is not None]
        return max(found, default=None)

    def ids(self, kind: int, run: str) -> list[list[str]]:
        """Each footer's sorted ids of the run's records of `kind`."""
        stored = self._stored(run)
        return [footer.ids(kind, stored) for footer in self._holding(kind, stored)]

    def locations(self, kind: int, run: str) -> dict[str, FrameLocation]:
        """Each of the run's ids of `kind` here and its first copy, oldest segment first; every row decoded and checked."""
        stored = self._stored(run)
        found: dict[str, FrameLocation] = {}
        for segment_id, footer in self.items():
            if (kind, stored) in footer.runs:
                for record_id, offset, length in footer.rows(kind, stored):
                    found.setdefault(record_id, FrameLocation(segment_id, offset, length))
        return found

    def entry_rows(self, segment_id: int, run: str) -> tuple[list[str], int] | None:
        """The run's entry ids in that segment (sorted, each once) and its entry row count there; None if it holds none."""
        footer, stored = self.get(segment_id), self._stored(run)
        section = None if footer is None else footer.runs.get((kinds.ENTRY, stored))
        if footer is None or section is None:
            return None
        return footer.ids(kinds.ENTRY, stored), section.row_count

    def runs(self, kind: int) -> set[str]:
        stored = {run for footer in self.values() for record_kind, run in footer.runs if record_kind == kind}
        return stored if self.sealer is None else {self.sealer.run_name(run, "a footer") for run in stored}

    def object_locations(self) -> dict[bytes, FrameLocation]:
        """Every object and its first copy here: every footer's object rows decoded (and checked)."""
        located: dict[bytes, FrameLocation] = {}
        for segment_id, footer in self.items():
            for oid, offset, length in footer.object_rows():
                located.setdefault(oid, FrameLocation(segment_id, offset, length))
        return located

    def rows_read(self) -> int:
        return sum(footer.rows_read for footer in self.values())
