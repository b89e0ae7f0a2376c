"""SQLite's vectors (ADR-0043): messages (schema 8) and memory rows (schema 14, ADR-0084) are
queued in the background above a mark, not by a trigger on every write, and a scope's newer
vectors are read in a fixed join order."""

from __future__ import annotations

from fermix_memory.adapters.sql.transaction import SqlTransaction
from fermix_memory.adapters.sql.vectors import WAITING_SQL, SqlVectorIndex, unvectored_sql, waiting_in

_TABLES = {"message": "messages", "memory": "memories"}


def _mark(kind: str) -> str:
    """The last id of ``kind`` queued so far; those above it wait too."""
    return f"coalesce((SELECT last_id FROM vector_marks WHERE kind = '{kind}'), 0)"


# What waits above the marks and is not queued already: a message never changes; a row above
# its mark whose text changed was queued by its update trigger.
_ABOVE = (f"(SELECT count(*) FROM messages WHERE id > {_mark('message')})"
          f" + (SELECT count(*) FROM memories m WHERE m.id > {_mark('memory')}"
          " AND NOT EXISTS (SELECT 1 FROM vector_queue q WHERE q.kind = 'memory' AND q.id = m.id))")
WAITING_WITH_MARK_SQL = f"SELECT ({WAITING_SQL}) + {_ABOVE}"
UNVECTORED_SQL = f"SELECT {unvectored_sql(_mark('message'), memories_queued_up_to=_mark('memory'))}"
_ANY_NEW = "SELECT " + " OR ".join(f"EXISTS (SELECT 1 FROM {table} WHERE id > {_mark(kind)})"
                                   for kind, table in _TABLES.items())
_QUEUE_NEW = tuple(f"INSERT INTO vector_queue(kind, id) SELECT '{kind}', id FROM {table} WHERE id > {_mark(kind)}"
                   " ON CONFLICT DO NOTHING" for kind, table in _TABLES.items())
_MARK_NEW = tuple(f"INSERT INTO vector_marks(kind, last_id) SELECT '{kind}', max(id) FROM {table} WHERE true"
                  " HAVING max(id) IS NOT NULL ON CONFLICT(kind) DO UPDATE SET last_id = max(last_id, excluded.last_id)"
                  for kind, table in _TABLES.items())


class SqliteVectorIndex(SqlVectorIndex):
    """The vector index of a SQLite home."""

    WAITING = WAITING_WITH_MARK_SQL
    # Only SQLite's fixed join order keeps the planner from walking the whole scope for a top-up.
    NEWER = "SELECT v.vector, m.id FROM message_vectors v CROSS JOIN messages m ON m.id = v.message_id"

    def queue_new(self) -> int:
        """Queue the messages and memory rows written above their marks, and move the marks."""
        # Most jobs follow commits that wrote no message nor row: a read tells, and saves them a write.
        if not int(self._rows(_ANY_NEW)[0][0]):
            return 0

        def work(tx: SqlTransaction) -> int:
            before = waiting_in(tx.cursor)
            for queue, mark in zip(_QUEUE_NEW, _MARK_NEW, strict=True):
                tx.cursor.execute(queue)
                tx.cursor.execute(mark)
            return waiting_in(tx.cursor) - before
        return self._store.write(work)
