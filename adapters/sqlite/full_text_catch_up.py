"""The full-text entries of new messages and memory rows, written after the write that added them
(ADR-0091, SQLite): every row of ``messages`` / ``memories`` whose id is at or below its index's
mark (``vector_marks``' rows ``messages_fts`` and ``memories_fts``) is in the index with its
current text, and no row above it is. An insert writes the row alone; the catch-up
(:func:`index_new`) indexes the rows above the mark, oldest first, and moves the mark past them in
the same transaction. A row's id is the position of the event that added it (rows are numbered in
commit order by the one writer, and an id never changes), so "above the mark" is exactly what
waits. The delete and update triggers (schema 17) touch the index only for rows at or below the
mark: a row that goes or changes before its catch-up was never indexed (FTS5's 'delete' of an
entry never written would damage an external-content index), and the catch-up indexes its text as
it then is."""

from __future__ import annotations

from fermix_memory.adapters.sql.cursor import SqlCursor

# Each full-text index: its content table and the columns it indexes.
FULL_TEXT: dict[str, tuple[str, tuple[str, ...]]] = {
    "messages_fts": ("messages", ("content", "sender", "scope_tokens")),
    "memories_fts": ("memories", ("key", "value")),
}
CATCH_UP_SCHEMA = 17  # the schema from which new rows wait for their entries
BATCH = 2_000  # rows of one table indexed by one step of a catch-up


def indexed_up_to(index: str) -> str:
    """SQL: the last id of ``index``'s content table that is in it (0: none yet)."""
    return f"coalesce((SELECT last_id FROM vector_marks WHERE kind = '{index}'), 0)"


# One read: whether a row of either table waits for its entries.
ANY_WAITING = "SELECT " + " OR ".join(
    f"EXISTS (SELECT 1 FROM {table} WHERE id > {indexed_up_to(index)})" for index, (table, _) in FULL_TEXT.items())

_MOVE = ("INSERT INTO vector_marks(kind, last_id) VALUES (?, ?)"
         " ON CONFLICT(kind) DO UPDATE SET last_id = max(last_id, excluded.last_id)")


def _indexed(index: str, when: str) -> str:
    return f"{when} <= {indexed_up_to(index)}"


def _values(prefix: str, columns: tuple[str, ...]) -> str:
    return ", ".join(f"{prefix}.{c}" for c in columns)


def triggers(index: str) -> str:
    """DDL: ``index``'s delete and update triggers, for rows at or below its mark only (its insert
    trigger dropped; the existing ones made anew)."""
    table, columns = FULL_TEXT[index]
    names = ", ".join(columns)
    delete = (f"INSERT INTO {index}({index}, rowid, {names}) VALUES ('delete', old.id, {_values('old', columns)});")
    insert = f"INSERT INTO {index}(rowid, {names}) VALUES (new.id, {_values('new', columns)});"
    return f"""
DROP TRIGGER IF EXISTS {index}_insert;
DROP TRIGGER IF EXISTS {index}_delete;
DROP TRIGGER IF EXISTS {index}_update;
CREATE TRIGGER {index}_delete AFTER DELETE ON {table} WHEN {_indexed(index, 'old.id')} BEGIN
    {delete}
END;
CREATE TRIGGER {index}_update AFTER UPDATE OF {names} ON {table} WHEN {_indexed(index, 'old.id')} BEGIN
    {delete}
    {insert}
END;
"""


def index_new(cur: SqlCursor, most: int | None = BATCH) -> int:
    """Index up to ``most`` rows of each table waiting above its mark (``None``: all of them) and
    move each mark past them (inside a write transaction); the rows indexed."""
    return sum(_index_table(cur, index, most) for index in FULL_TEXT)


def _index_table(cur: SqlCursor, index: str, most: int | None) -> int:
    table, columns = FULL_TEXT[index]
    mark = int(cur.execute(f"SELECT {indexed_up_to(index)}").fetchall()[0][0])
    last, count = cur.execute(f"SELECT max(id), count(*) FROM (SELECT id FROM {table} WHERE id > ? ORDER BY id"
                              " LIMIT ?)", (mark, -1 if most is None else most)).fetchall()[0]
    if last is None:
        return 0
    names = ", ".join(columns)
    cur.execute(f"INSERT INTO {index}(rowid, {names}) SELECT id, {names} FROM {table} WHERE id > ? AND id <= ?"
                " ORDER BY id", (mark, int(last)))
    cur.execute(_MOVE, (index, int(last)))
    return int(count)


# Every stored row is in its index (after a rebuild): each mark moves to its table's last id.
ALL_INDEXED = "".join(
    f"INSERT INTO vector_marks(kind, last_id) SELECT '{index}', max(id) FROM {table} WHERE true HAVING max(id)"
    " IS NOT NULL ON CONFLICT(kind) DO UPDATE SET last_id = max(last_id, excluded.last_id);"
    for index, (table, _) in FULL_TEXT.items())


def migrate_to_catch_up(cur: SqlCursor) -> None:
    """Schema 17's Python step (after its DDL dropped the insert triggers): on a file at 16 every
    row is indexed (by those triggers): the marks go to the last ids. A file whose version was set
    back keeps its marks, and the rows waiting above them are indexed first."""
    for index in FULL_TEXT:
        if cur.execute("SELECT 1 FROM vector_marks WHERE kind = ?", (index,)).fetchall():
            _index_table(cur, index, None)
    cur.execute(ALL_INDEXED)
