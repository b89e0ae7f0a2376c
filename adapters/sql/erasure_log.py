"""What the log keeps of erased memory rows, read for the as-of answers (ADR-0083): a stream's
entries with redacted ones (position, kind, time), events by position, and erasure records after
a position. Shared by both dialects: plain statements on the ``events`` table."""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator
from datetime import datetime

from fermix_memory.adapters.sql.cursor import SqlReader
from fermix_memory.adapters.sql.event_log import recorded_from_row
from fermix_memory.application.store_ports import RecordedEvent
from fermix_memory.domain.erased_rows import LogRow

_IN_BATCH = 500  # positions per statement (well under every driver's limit on parameters)
_EVENT_COLUMNS = "position, stream, version, kind, schema, payload"


class SqlErasureLog:
    """The ``ErasureLog`` of ``application.as_of`` over a store's read connection."""

    def __init__(self, reader: Callable[[], SqlReader]) -> None:
        self._reader = reader

    def stream_rows(self, stream: str) -> list[LogRow]:
        """Every entry of ``stream`` in version order, redacted ones included (the stream's range
        of the ``UNIQUE(stream, version)`` index; no payload is read)."""
        rows = self._reader().execute(
            "SELECT position, kind, recorded_at, payload IS NULL FROM events WHERE stream = ? ORDER BY version",
            (stream,)).fetchall()
        return [LogRow(position=int(p), kind=str(k), recorded_at=datetime.fromisoformat(str(at)), redacted=bool(r))
                for p, k, at, r in rows]

    def events_at(self, positions: Collection[int]) -> list[RecordedEvent]:
        """The readable events at ``positions``, in log order (by the primary key)."""
        wanted = sorted(set(positions))
        found: list[RecordedEvent] = []
        for start in range(0, len(wanted), _IN_BATCH):
            batch = wanted[start:start + _IN_BATCH]
            marks = ", ".join("?" * len(batch))
            rows = self._reader().execute(
                f"SELECT {_EVENT_COLUMNS} FROM events WHERE position IN ({marks}) AND payload IS NOT NULL"
                " ORDER BY position", tuple(batch)).fetchall()
            found += [recorded_from_row(row) for row in rows]
        return found

    def records_after(self, position: int, kinds: Collection[str]) -> Iterator[RecordedEvent]:
        """Readable events of ``kinds`` after ``position`` in log order (a walk of the log's end:
        for erasures recorded before receipts named them)."""
        names = sorted(kinds)
        marks = ", ".join("?" * len(names))
        rows = self._reader().execute(
            f"SELECT {_EVENT_COLUMNS} FROM events WHERE position > ? AND kind IN ({marks}) AND payload IS NOT NULL"
            " ORDER BY position", (position, *names)).fetchall()
        for row in rows:
            yield recorded_from_row(row)
