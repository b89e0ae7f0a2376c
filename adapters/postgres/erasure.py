"""The PostgreSQL side of the ``Erasure`` port: redact payloads inside a write, then rewrite the
touched tables so the erased bytes leave the server's table files (ADR-0029 says what PostgreSQL
cannot promise: WAL archives, replicas, backups)."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import Any, TypeVar

from fermix_memory.adapters.postgres.event_store import PostgresEventStore
from fermix_memory.adapters.postgres.transaction import PostgresTransaction
from fermix_memory.adapters.sqlite.codec import encoded_text
from fermix_memory.adapters.sqlite.erasure import SqliteErasingTransaction
from fermix_memory.adapters.sqlite.transaction import recorded_from_row
from fermix_memory.application.ports import ErasureTransaction, RecordedEvent, ScrubReport, WriteTransaction

T = TypeVar("T")

# The tables an erasure deletes from or redacts in: rewritten by the scrub.
SCRUBBED_TABLES = ("events", "messages", "memories", "resource_revisions", "resources", "review_state",
                   "scheduled_jobs", "job_runs", "memory_sources", "conversation_state",
                   "message_vectors", "memory_vectors")  # vectors: derivatives of erased text (ADR-0043)


class _ErasingTransaction(SqliteErasingTransaction):
    """Implements ``ErasureTransaction`` on the write transaction it accompanies (PostgreSQL's
    functions where SQLite's differ)."""

    def __init__(self, tx: PostgresTransaction) -> None:
        super().__init__(tx)
        self._tx = tx

    def erasure_candidates(self, owner_id: str, kinds: Collection[str]) -> list[RecordedEvent]:
        # The payload filter only narrows what is decoded; the events' own declarations decide.
        rows = self._cursor.execute(
            "SELECT position, stream, version, kind, schema, payload FROM events WHERE payload IS NOT NULL"
            " AND (kind = ANY(?) OR strpos(payload, ?) > 0) ORDER BY position",
            (sorted(kinds), encoded_text(owner_id)),
        ).fetchall()
        return [recorded_from_row(row) for row in rows]

    def redact(self, positions: Sequence[int]) -> int:
        if positions:  # the erased bytes stay in dead tuples and the WAL until scrubbed
            self._cursor.execute("UPDATE events SET payload = NULL WHERE position = ANY(?) AND payload IS NOT NULL",
                                 (list(positions),))
            self._cursor.execute("INSERT INTO scrub_pending(id, since_position) VALUES (1, ?)"
                                 " ON CONFLICT (id) DO NOTHING", (self._tx.position,))
        return len(positions)


class PostgresErasure:
    """Implements the ``Erasure`` port on a :class:`PostgresEventStore`."""

    def __init__(self, store: PostgresEventStore) -> None:
        self.store = store

    def erase(self, work: Callable[[WriteTransaction, ErasureTransaction], T]) -> T:
        def both(tx: PostgresTransaction) -> T:
            return work(tx, _ErasingTransaction(tx))

        # Every chain (ADR-0031): an owner's messages live in conversations' chains and their rules
        # in other owners' revisions; no write of any chain may commit while the erasure reads
        # what to redact and drops the rows, or a message could escape it, or outlive its row.
        return self.store.write(both, every_chain=True)

    def scrub(self) -> ScrubReport:
        """``VACUUM FULL`` of every table an erasure touches (each rewritten into new files, the old
        ones removed, so no dead tuple keeps an erased byte), then a ``CHECKPOINT`` so the WAL that
        still holds them can be recycled. ``wal_truncated`` is false when the checkpoint was not
        allowed (a role without ``pg_checkpoint``): then the erasure stays pending."""
        with self.store.connection("scrubbing the PostgreSQL store") as conn:
            before = self._bytes(conn)
            for table in SCRUBBED_TABLES:
                conn.execute(f"VACUUM (FULL, ANALYZE) {table}")
            checkpointed = self._checkpoint(conn)
            if checkpointed:
                conn.execute("DELETE FROM scrub_pending")
            return ScrubReport(wal_truncated=checkpointed, bytes_before=before, bytes_after=self._bytes(conn))

    def scrub_pending(self) -> bool:
        """Whether an erasure committed but its scrub has not finished."""
        return bool(self.store.rows("SELECT count(*) FROM scrub_pending")[0][0])

    @staticmethod
    def _checkpoint(conn: Any) -> bool:
        from psycopg import errors

        try:
            conn.execute("CHECKPOINT")
        except errors.InsufficientPrivilege:
            return False
        return True

    @staticmethod
    def _bytes(conn: Any) -> int:
        names = ", ".join(f"'{t}'" for t in SCRUBBED_TABLES)
        row = conn.execute(f"SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c"
                           f" WHERE c.relname IN ({names}) AND c.relkind = 'r'"
                           " AND c.relnamespace = current_schema()::regnamespace").fetchone()
        return int(row[0])
