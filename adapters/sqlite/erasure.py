"""The apsw side of the ``Erasure`` port: redact payloads inside a write, then scrub the files.

Redaction nulls an event's payload (its digest stays in the hash chain, so the chain still
verifies) and notes durably, in the same transaction, that the files hold erased bytes until
a scrub succeeds. The scrub merges the full-text indexes, rewrites the file with
``secure_delete`` and empties the write-ahead log, with every other writer held back.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from pathlib import Path
from typing import TypeVar

from fermix_memory.adapters.sqlite.codec import encoded_text
from fermix_memory.adapters.sqlite.connection import translated_errors
from fermix_memory.adapters.sqlite.event_store import SqliteEventStore
from fermix_memory.adapters.sqlite.schema import FTS_TABLES
from fermix_memory.adapters.sqlite.transaction import SqliteTransaction, recorded_from_row
from fermix_memory.application.ports import ErasureTransaction, RecordedEvent, ScrubReport, WriteTransaction

T = TypeVar("T")

# Every projection table that names an owner: an agent holds something of an owner when one
# of these has a row of both.
OWNER_TABLES = ("messages", "memories", "resources", "review_state", "scheduled_jobs", "memory_sources")


class SqliteErasingTransaction:
    """Implements ``ErasureTransaction`` on the write transaction it accompanies."""

    def __init__(self, tx: SqliteTransaction) -> None:
        self._tx = tx
        self._cursor = tx.cursor

    def agents_of_owner(self, owner_id: str) -> list[str]:
        union = " UNION ".join(f"SELECT agent_id FROM {table} WHERE owner_id = :o" for table in OWNER_TABLES)
        rows = self._cursor.execute(union, {"o": owner_id}).fetchall()
        return sorted(str(r[0]) for r in rows if r[0] is not None)

    def erasure_candidates(self, owner_id: str, kinds: Collection[str]) -> list[RecordedEvent]:
        # The payload filter only narrows what is decoded; the events' own declarations decide.
        wanted = sorted(kinds)
        rows = self._cursor.connection.cursor().execute(
            "SELECT position, stream, version, kind, schema, payload FROM events WHERE payload IS NOT NULL"
            f" AND (kind IN ({','.join('?' * len(wanted))}) OR instr(payload, ?) > 0) ORDER BY position",
            (*wanted, encoded_text(owner_id)),
        ).fetchall()
        return [recorded_from_row(row) for row in rows]

    def redact(self, positions: Sequence[int]) -> int:
        self._cursor.executemany("UPDATE events SET payload = NULL WHERE position = ? AND payload IS NOT NULL",
                                 [(p,) for p in positions])
        if positions:  # the erased bytes stay in free pages and FTS segments until scrubbed
            self._cursor.execute("INSERT OR IGNORE INTO scrub_pending(id, since_position) VALUES (1, ?)",
                                 (self._tx.position,))
        return len(positions)


class SqliteErasure:
    """Implements the ``Erasure`` port on a :class:`SqliteEventStore`."""

    def __init__(self, store: SqliteEventStore) -> None:
        self.store = store

    @property
    def path(self) -> Path:
        return self.store.path

    def erase(self, work: Callable[[WriteTransaction, ErasureTransaction], T]) -> T:
        def both(tx: SqliteTransaction) -> T:
            return work(tx, SqliteErasingTransaction(tx))

        return self.store.write(both)

    def scrub(self) -> ScrubReport:
        """Merge the full-text indexes (dropping deleted entries), rewrite the file (``VACUUM``,
        with ``secure_delete``) and empty the WAL, with every other writer of this store held
        back meanwhile. ``wal_truncated`` is false when a reader elsewhere kept the WAL alive."""
        with self.store.exclusive("rewritten") as conn:
            before = self._file_bytes()
            with translated_errors("scrubbing memory.db"):
                conn.execute("PRAGMA secure_delete = ON")
                try:
                    with conn:
                        for table in FTS_TABLES:
                            conn.execute(f"INSERT INTO {table}({table}) VALUES ('optimize')")
                    conn.execute("VACUUM")
                finally:
                    conn.execute("PRAGMA secure_delete = OFF")
                busy = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()[0][0]
                if busy == 0:  # every erased byte is gone from the files: the erasure is finished
                    conn.execute("DELETE FROM scrub_pending")
                    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            remains = () if busy == 0 else (
                f"another process holds a read open on {self.path}, so its write-ahead log still has old pages;"
                " run forget again once it has closed",)
            return ScrubReport(wal_truncated=busy == 0, bytes_before=before, bytes_after=self._file_bytes(),
                               store=str(self.path), remains=remains)

    def scrub_pending(self) -> bool:
        """Whether an erasure committed but its scrub has not finished (killed, or a reader
        elsewhere kept the WAL): its bytes may still be in the files."""
        with translated_errors("reading memory.db"):
            return bool(self.store.reader().execute("SELECT count(*) FROM scrub_pending").fetchall()[0][0])

    def _file_bytes(self) -> int:
        files = (self.path, self.path.with_name(self.path.name + "-wal"))
        return sum(f.stat().st_size for f in files if f.exists())
