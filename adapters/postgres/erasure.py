"""The PostgreSQL side of the ``Erasure`` port: the shared logical step (``sql.erasure``), then the
physical one: rewrite the touched tables so the erased bytes leave the server's table files
(ADR-0029 says what PostgreSQL cannot promise: WAL archives, replicas, backups)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from fermix_memory.adapters.postgres.connection import described
from fermix_memory.adapters.postgres.event_store import PostgresEventStore
from fermix_memory.adapters.postgres.transaction import PostgresTransaction
from fermix_memory.adapters.sql.erasure import CANDIDATES, ErasingTransaction
from fermix_memory.application.store_ports import ErasureTransaction, ScrubReport, WriteTransaction

T = TypeVar("T")

# The tables an erasure deletes from or redacts in: rewritten by the scrub.
SCRUBBED_TABLES = ("events", "messages", "memories", "resource_revisions", "resources", "review_state",
                   "scheduled_jobs", "job_runs", "memory_sources", "conversation_state",
                   "message_vectors", "memory_vectors",  # vectors: derivatives of erased text (ADR-0043)
                   "message_marks")  # the days and names of erased messages


class PostgresErasingTransaction(ErasingTransaction):
    """Implements ``ErasureTransaction`` on the write transaction it accompanies (PostgreSQL's SQL)."""

    def _candidates(self, kinds: list[str], needle: str) -> tuple[str, Any]:
        return f"{CANDIDATES} AND (kind = ANY(?) OR strpos(payload, ?) > 0) ORDER BY position", (kinds, needle)

    def _redact(self, positions: Sequence[int]) -> None:
        # The erased bytes stay in dead tuples and the WAL until scrubbed.
        self._cursor.execute("UPDATE events SET payload = NULL WHERE position = ANY(?) AND payload IS NOT NULL",
                             (list(positions),))


class PostgresErasure:
    """Implements the ``Erasure`` port on a :class:`PostgresEventStore`."""

    def __init__(self, store: PostgresEventStore) -> None:
        self.store = store

    def erase(self, work: Callable[[WriteTransaction, ErasureTransaction], T]) -> T:
        def both(tx: PostgresTransaction) -> T:
            return work(tx, PostgresErasingTransaction(tx))

        # Every chain (ADR-0031): an owner's messages live in conversations' chains and their rules
        # in other owners' revisions; no write of any chain may commit while the erasure reads
        # what to redact and drops the rows, or a message could escape it, or outlive its row.
        return self.store.write(both, every_chain=True)

    @property
    def name(self) -> str:
        """How messages name this store."""
        return described(self.store.url)

    def scrub(self) -> ScrubReport:
        """``VACUUM FULL`` of every table an erasure touches that this role may vacuum (each
        rewritten into new files, the old ones removed, so no dead tuple keeps an erased byte),
        then a ``CHECKPOINT`` so the WAL that still holds them can be recycled. Every step this
        role may take is then done, so the erasure is finished (no longer pending: running it
        again would do no more); ``wal_truncated`` is false when the checkpoint was not allowed
        (a role without ``pg_checkpoint``) and ``remains`` says what keeps erased bytes and who
        clears it."""
        with self.store.connection(f"scrubbing {self.name}") as conn:
            before = self._bytes(conn)
            skipped = [table for table in SCRUBBED_TABLES if not _vacuumed(conn, table)]
            checkpointed = self._checkpoint(conn)
            conn.execute("DELETE FROM scrub_pending")
            role = str(conn.execute("SELECT current_user").fetchone()[0])
            remains = (*_remains(self.name, role, skipped, checkpointed), *_stale_statistics(conn, self.name))
            return ScrubReport(wal_truncated=checkpointed, bytes_before=before, bytes_after=self._bytes(conn),
                               store=self.name, finished=True, remains=remains)

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


def _vacuumed(conn: Any, table: str) -> bool:
    """``VACUUM FULL`` of ``table``; False when the server skipped it: a role that may not vacuum
    it gets a warning, not an error (the table's owner may, a superuser, and from PostgreSQL 17 a
    role with ``MAINTAIN`` on it), so the warning is what tells."""
    from psycopg import errors

    warned: list[str] = []

    def note(diagnostic: Any) -> None:
        if diagnostic.severity_nonlocalized == "WARNING":
            warned.append(str(diagnostic.message_primary))

    conn.add_notice_handler(note)
    try:
        conn.execute(f"VACUUM (FULL, ANALYZE) {table}")
    except errors.InsufficientPrivilege:
        return False
    finally:
        conn.remove_notice_handler(note)
    return not warned


def _stale_statistics(conn: Any, name: str) -> tuple[str, ...]:
    """What statistics of a person's words a database analysed before schema 9 still holds: set
    to none then, their columns are never analysed again, but ``ANALYZE`` leaves the rows taken
    before in ``pg_statistic``, which only a superuser may delete (ADR-0049)."""
    from fermix_memory.adapters.postgres.migrations import UNANALYSED_COLUMNS

    pairs = ", ".join(f"('{t}', '{c}')" for t, columns in UNANALYSED_COLUMNS.items() for c in columns)
    rows = conn.execute("SELECT tablename || '.' || attname FROM pg_stats WHERE schemaname = current_schema()"
                        f" AND (tablename::text, attname::text) IN ({pairs}) ORDER BY 1").fetchall()
    if not rows:
        return ()
    return (f"the statistics {name} took of {', '.join(str(r[0]) for r in rows)} before it stopped analysing"
            " them may hold erased values in pg_statistic: a superuser deletes their rows there (DELETE FROM"
            " pg_statistic WHERE starelid = '<table>'::regclass AND staattnum = <column's attnum>), then runs"
            " VACUUM FULL pg_statistic",)


def _remains(name: str, role: str, skipped: Sequence[str], checkpointed: bool) -> tuple[str, ...]:
    """What keeps erased bytes after a scrub by ``role`` and who clears it, one sentence each."""
    remains = []
    if skipped:
        remains.append(f"the tables {', '.join(skipped)} of {name} keep erased bytes in their dead rows until their"
                       f" owner runs VACUUM FULL on them (the role {role} may not vacuum them)")
    if not checkpointed:
        remains.append(f"the erased text stays in the write-ahead log of {name} until the server's next checkpoint"
                       f" recycles its segments: CHECKPOINT needs the role pg_checkpoint (GRANT pg_checkpoint TO"
                       f" {role}), which {role} lacks; WAL archives and base backups keep it until they are deleted")
    return tuple(remains)
