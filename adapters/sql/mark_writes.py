"""The ``message_marks`` projection (``domain.message_marks``): the days each message speaks of
(``d:2024-02-26``) and the names it mentions (``e:mei``), one row per mark, written in the
transaction that writes the message and gone with it (a trigger on SQLite, a cascade on
PostgreSQL); ``sql.marks`` reads it.

A message without marks has no row. The rows are what the code's ``marks_of`` finds: a change
of what it finds needs a migration that marks the stored messages anew (``MESSAGE_MARKS``'
``DELETE`` and :func:`fill_marks` again), or verify finds the live marks differing from a
replay's."""

from __future__ import annotations

from datetime import datetime

from fermix_memory.adapters.sql.cursor import SqlCursor
from fermix_memory.domain import events as ev
from fermix_memory.domain.message_marks import marks_of

INSERT_MARK = "INSERT INTO message_marks(message_id, mark) VALUES (?,?)"
FILL_BATCH = 2_000  # messages read at a time when a migration marks the messages already stored


def mark_rows(position: int, e: ev.MessageAppended) -> list[tuple[int, str]]:
    """The ``message_marks`` rows of an appended message (none when it has no marks)."""
    return [(position, mark) for mark in marks_of(e.content, e.created_at)]


def write_marks(cur: SqlCursor, rows: list[tuple[int, str]]) -> None:
    """Insert ``rows`` (one statement; nothing when there are none)."""
    if rows:
        cur.executemany(INSERT_MARK, rows)


def fill_marks(cur: SqlCursor, batch: int = FILL_BATCH) -> int:
    """Mark the messages already stored (a migration's step, inside its transaction), ``batch``
    messages at a time; the marks written."""
    written, after = 0, 0
    while True:
        rows = cur.execute("SELECT id, content, created_at FROM messages WHERE id > ? ORDER BY id LIMIT ?",
                           (after, batch)).fetchall()
        if not rows:
            return written
        marks = [(int(i), mark) for i, content, at in rows for mark in marks_of(content, datetime.fromisoformat(at))]
        write_marks(cur, marks)
        written += len(marks)
        after = int(rows[-1][0])
