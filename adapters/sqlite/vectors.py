"""SQLite's vectors (ADR-0043): messages are queued in the background above a mark (schema 8),
not by a trigger on every append, and a scope's newer vectors are read in a fixed join order."""

from __future__ import annotations

from fermix_memory.adapters.sql.transaction import SqlTransaction
from fermix_memory.adapters.sql.vectors import WAITING_SQL, SqlVectorIndex, unvectored_sql, waiting_in

# The last message id queued so far; the messages above it wait too.
_MARK = "coalesce((SELECT last_id FROM vector_marks WHERE kind = 'message'), 0)"
WAITING_WITH_MARK_SQL = f"SELECT ({WAITING_SQL}) + (SELECT count(*) FROM messages WHERE id > {_MARK})"
UNVECTORED_SQL = f"SELECT {unvectored_sql(_MARK)}"
_ANY_NEW = f"SELECT EXISTS (SELECT 1 FROM messages WHERE id > {_MARK})"
_QUEUE_NEW = (f"INSERT INTO vector_queue(kind, id) SELECT 'message', id FROM messages WHERE id > {_MARK}"
              " ON CONFLICT DO NOTHING")
_MARK_NEW = ("INSERT INTO vector_marks(kind, last_id) SELECT 'message', max(id) FROM messages WHERE true"
             " HAVING max(id) IS NOT NULL ON CONFLICT(kind) DO UPDATE SET last_id = max(last_id, excluded.last_id)")


class SqliteVectorIndex(SqlVectorIndex):
    """The vector index of a SQLite home."""

    WAITING = WAITING_WITH_MARK_SQL
    # Only SQLite's fixed join order keeps the planner from walking the whole scope for a top-up.
    NEWER = "SELECT v.vector, m.id FROM message_vectors v CROSS JOIN messages m ON m.id = v.message_id"

    def queue_new(self) -> int:
        """Queue the messages written above the mark, and move the mark."""
        # Most jobs follow commits that wrote no message: a read tells, and saves them a write.
        if not int(self._rows(_ANY_NEW)[0][0]):
            return 0

        def work(tx: SqlTransaction) -> int:
            before = waiting_in(tx.cursor)
            tx.cursor.execute(_QUEUE_NEW)
            tx.cursor.execute(_MARK_NEW)
            return waiting_in(tx.cursor) - before
        return self._store.write(work)
