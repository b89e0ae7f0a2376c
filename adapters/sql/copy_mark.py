"""The mark of an unfinished copy (ADR-0051): a copy into a store (``fermix storage migrate``)
records which home it copies in the transaction of its first events and removes it in the
transaction of its last, so a copy cut off in between is known as one. Every dialect runs these
statements through its cursor."""

from __future__ import annotations

from fermix_memory.adapters.sql.cursor import SqlCursor, SqlReader

_READ = "SELECT source FROM unfinished_copy WHERE id = 1"


def set_copy_mark(cursor: SqlCursor, source: str) -> None:
    cursor.execute("INSERT INTO unfinished_copy(id, source) VALUES (1, ?)"
                   " ON CONFLICT(id) DO UPDATE SET source = excluded.source", (source,))


def clear_copy_mark(cursor: SqlCursor) -> None:
    cursor.execute("DELETE FROM unfinished_copy WHERE id = 1")


def read_copy_mark(cursor: SqlReader) -> str | None:
    """The home an unfinished copy into this store copies, else ``None``."""
    rows = cursor.execute(_READ).fetchall()
    return str(rows[0][0]) if rows else None

