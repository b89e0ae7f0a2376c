"""The hash-chained log as rows (ADR-0031): inserting, reading and linking ``events`` rows and
the chains' heads, the same statements on every SQL dialect."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from fermix_memory.adapters.sql.cursor import SqlCursor, SqlReader
from fermix_memory.application.errors import ConcurrencyConflict, IntegrityError
from fermix_memory.application.store_ports import RecordedEvent
from fermix_memory.application.streams import chain_for
from fermix_memory.domain.log_chain import GENESIS_HASH, MAX_CHAINS, LoggedEvent, chain_hash, follows, payload_digest

INSERT_EVENT = (
    "INSERT INTO events(position, stream, version, kind, schema, recorded_at, payload,"
    " payload_sha256, prev_hash, hash) VALUES (?,?,?,?,?,?,?,?,?,?)"
)
# Every column of the log, in log order: what the chain check walks, a replay and an export copy.
LOG_COLUMNS = "position, stream, version, kind, schema, recorded_at, payload, payload_sha256, prev_hash, hash"
LOG_ROWS = f"SELECT {LOG_COLUMNS} FROM events WHERE position > ? ORDER BY position"


def insert_row(cursor: SqlCursor, row: tuple[Any, ...]) -> None:
    """Insert one log row recorded elsewhere (the columns of :data:`LOG_ROWS`) as it is, and
    write its projections as a live append does (nothing for a redacted payload)."""
    cursor.execute(INSERT_EVENT, row)
    from fermix_memory.adapters.sql.codec import decode_payload  # when a row is written or read, not at open
    from fermix_memory.adapters.sql.projections import project

    position, kind, schema, payload = row[0], row[3], row[4], row[6]
    if payload is not None:
        project(cursor, position, decode_payload(kind, schema, payload))


def append_logged_rows(cursor: SqlCursor, position: int, heads: list[tuple[int, str]],
                       events: Sequence[LoggedEvent]) -> int:
    """Append rows of another log after the log's last ``position`` and its chains' ``heads``
    (``(position, hash)`` per chain, updated in place), as they are, with their projections; the
    new last position. A row that does not follow the log (:class:`ConcurrencyConflict`) or does
    not link to its chain or match its digest (:class:`IntegrityError`) is refused before it is
    written: the caller's transaction then appends nothing. Every store runs its copy through here.
    The rows are checked first, then written by one statement, and their projections by
    :func:`project_each` (each run of messages by one statement), in log order."""
    from fermix_memory.adapters.sql.codec import decode_payload  # when rows are written, not at open
    from fermix_memory.adapters.sql.projections import project_each

    chains = len(heads)
    rows: list[tuple[Any, ...]] = []
    for e in events:
        if not follows(e.position, position, chains):
            raise ConcurrencyConflict(f"event {e.position} does not follow this log's head"
                                      f" {position}: nothing was appended")
        chain = chain_for(e.stream, chains)
        last_hash = heads[chain][1]
        expected = chain_hash(last_hash, e.position, e.stream, e.version, e.kind, e.schema, e.recorded_at,
                              e.payload_sha256)
        if expected != e.hash or (e.payload is not None and payload_digest(e.payload) != e.payload_sha256):
            raise IntegrityError(f"event {e.position} ({e.kind}) does not link to this log's"
                                 f" event {heads[chain][0]}: nothing was appended")
        rows.append(row_of(e, last_hash))
        position, heads[chain] = e.position, (e.position, e.hash)
    if rows:
        cursor.executemany(INSERT_EVENT, rows)
        project_each(cursor, [(e.position, decode_payload(e.kind, e.schema, e.payload))
                              for e in events if e.payload is not None])
    return position


def read_chain_heads(cursor: SqlReader) -> list[tuple[int, str]]:
    """Each chain's head ``(position, hash)`` in chain order: the ``chain_heads`` rows of a log
    with several chains, else the last event (one chain)."""
    rows = cursor.execute("SELECT position, hash FROM chain_heads ORDER BY chain").fetchall()
    if rows:
        return [(int(p), str(h)) for p, h in rows]
    last = cursor.execute("SELECT position, hash FROM events ORDER BY position DESC LIMIT 1").fetchall()
    return [(int(last[0][0]), str(last[0][1]))] if last else [(0, GENESIS_HASH)]


def write_chain_heads(cursor: SqlCursor, heads: Mapping[int, tuple[int, str]] | Sequence[tuple[int, str]],
                      chains: Iterable[int]) -> None:
    """Record the heads of ``chains`` in ``chain_heads``."""
    for chain in sorted(chains):
        cursor.execute("UPDATE chain_heads SET position = ?, hash = ? WHERE chain = ?", (*heads[chain], chain))


def chain_count(cursor: SqlReader) -> int:
    """How many chains the log has (no ``chain_heads`` rows: one)."""
    return max(1, int(cursor.execute("SELECT count(*) FROM chain_heads").fetchall()[0][0]))


def set_chain_count(cursor: SqlCursor, chains: int) -> None:
    """Give an empty log ``chains`` chains (one: no ``chain_heads`` rows); a log holding events
    keeps its own (:class:`IntegrityError`, nothing changed)."""
    if type(chains) is not int or not 1 <= chains <= MAX_CHAINS:
        raise IntegrityError(f"a log has 1 to {MAX_CHAINS} chains, not {chains!r}")
    if chains == chain_count(cursor):
        return
    if last_position(cursor):
        raise IntegrityError(f"this log holds events on {chain_count(cursor)} chain(s); it cannot take {chains}:"
                             " only an empty log can")
    cursor.execute("DELETE FROM chain_heads")
    if chains > 1:
        for chain in range(chains):
            cursor.execute("INSERT INTO chain_heads(chain, position, hash) VALUES (?, 0, ?)", (chain, GENESIS_HASH))


def last_position(cursor: SqlReader) -> int:
    return int(cursor.execute("SELECT coalesce(max(position), 0) FROM events").fetchall()[0][0])


def logged_from_row(row: tuple[Any, ...]) -> LoggedEvent:
    """A :data:`LOG_ROWS` row as a :class:`LoggedEvent` (its ``prev_hash`` is the row before's hash)."""
    position, stream, version, kind, schema, recorded_at, payload, digest, _, row_hash = row
    return LoggedEvent(position=position, stream=stream, version=version, kind=kind, schema=schema,
                       recorded_at=recorded_at, payload=payload, payload_sha256=digest, hash=row_hash)


def row_of(e: LoggedEvent, prev_hash: str) -> tuple[Any, ...]:
    return (e.position, e.stream, e.version, e.kind, e.schema, e.recorded_at, e.payload, e.payload_sha256,
            prev_hash, e.hash)


def read_log(cursor: SqlReader, after: int = 0, stream: str | None = None) -> Iterator[RecordedEvent]:
    """Decoded events after ``after`` (of one stream when given); redacted ones are skipped."""
    if stream is None:
        rows = cursor.execute(
            "SELECT position, stream, version, kind, schema, payload FROM events WHERE position > ? ORDER BY position",
            (after,),
        )
    else:
        rows = cursor.execute(
            "SELECT position, stream, version, kind, schema, payload FROM events"
            " WHERE stream = ? AND position > ? ORDER BY version",
            (stream, after),
        )
    for row in rows:
        if row[5] is not None:  # redacted: the digest stays in the chain, the content is gone
            yield recorded_from_row(row)


def recorded_from_row(row: tuple[Any, ...]) -> RecordedEvent:
    """A ``(position, stream, version, kind, schema, payload)`` row of a readable event."""
    from fermix_memory.adapters.sql.codec import decode_payload

    position, stream, version, kind, schema, payload = row
    return RecordedEvent(position=position, stream=stream, version=version, event=decode_payload(kind, schema, payload))
