"""The ``message_marks`` projection (``domain.message_marks``): the days each message speaks of
(``d:2024-02-26``) and the names it mentions (``e:mei``), one row per mark, gone with its message
(a trigger on SQLite, a cascade on PostgreSQL); ``sql.marks`` reads it.

A message without marks has no row. The rows are what the code's ``marks_of`` finds: a change
of what it finds needs a migration that marks the stored messages anew (``MESSAGE_MARKS``'
``DELETE`` and :func:`fill_marks` again), or verify finds the live marks differing from a
replay's.

Where they are written (ADR-0085): PostgreSQL, and a log copied or replayed on any store, write
a message's marks in the transaction that writes the message. SQLite's appends leave them to a
catch-up (:func:`mark_new`, the search index's upkeep, and any read of the marks first): the
messages above ``vector_marks``' mark for ``message_marks`` wait for theirs, as messages above
the mark for ``message`` wait for a vector (ADR-0043). :func:`marked_rows` gives the rows as
they are once caught up, whatever waits: what the audit's checksums read."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

from fermix_memory.adapters.sql.cursor import SqlCursor, SqlReader
from fermix_memory.domain import events as ev
from fermix_memory.domain.message_marks import marks_of

# A catch-up may find marks already written above the mark (a copied log writes them at once).
INSERT_MARK = "INSERT INTO message_marks(message_id, mark) VALUES (?,?) ON CONFLICT DO NOTHING"
FILL_BATCH = 2_000  # messages read at a time when a migration or a catch-up marks stored messages
MARK_KIND = "message_marks"  # its row in ``vector_marks`` (SQLite)
# The last message id marked so far on SQLite; the messages above it wait for their marks.
MARKED_UP_TO = f"coalesce((SELECT last_id FROM vector_marks WHERE kind = '{MARK_KIND}'), 0)"
ANY_UNMARKED = f"SELECT EXISTS (SELECT 1 FROM messages WHERE id > {MARKED_UP_TO})"
_MOVE_MARK = ("INSERT INTO vector_marks(kind, last_id) VALUES (?, ?)"
              " ON CONFLICT(kind) DO UPDATE SET last_id = max(last_id, excluded.last_id)")
# Everything marked: what a log folded with its marks (a replay, a copy) records.
MARK_ALL = ("INSERT INTO vector_marks(kind, last_id) SELECT ?, max(id) FROM messages WHERE true"
            " HAVING max(id) IS NOT NULL ON CONFLICT(kind) DO UPDATE SET last_id = max(last_id, excluded.last_id)")
_MESSAGES_AFTER = "SELECT id, content, created_at FROM messages WHERE id > ? ORDER BY id LIMIT ?"


def mark_rows(position: int, e: ev.MessageAppended) -> list[tuple[int, str]]:
    """The ``message_marks`` rows of an appended message (none when it has no marks)."""
    return [(position, mark) for mark in marks_of(e.content, e.created_at)]


def write_marks(cur: SqlCursor, rows: list[tuple[int, str]]) -> None:
    """Insert ``rows`` (one statement; nothing when there are none)."""
    if rows:
        cur.executemany(INSERT_MARK, rows)


def _stored_rows(rows: list[tuple[Any, ...]]) -> list[tuple[int, str]]:
    return [(int(i), mark) for i, content, at in rows for mark in marks_of(content, datetime.fromisoformat(at))]


def fill_marks(cur: SqlCursor, batch: int = FILL_BATCH) -> int:
    """Mark the messages already stored (a migration's step, inside its transaction), ``batch``
    messages at a time; the marks written."""
    return _fill(cur, batch, 0, None)[0]


def _fill(cur: SqlCursor, batch: int, after: int, most: int | None) -> tuple[int, int, int]:
    """Mark the messages stored above id ``after``, ``batch`` at a time, at most ``most`` of them
    (all: ``None``): the marks written, the last message id marked (``after``: none), the messages."""
    written = messages = 0
    while most is None or messages < most:
        take = batch if most is None else min(batch, most - messages)
        rows = cur.execute(_MESSAGES_AFTER, (after, take)).fetchall()
        if not rows:
            break
        marks = _stored_rows(rows)
        write_marks(cur, marks)
        written, messages, after = written + len(marks), messages + len(rows), int(rows[-1][0])
    return written, after, messages


def mark_new(cur: SqlCursor, most: int = FILL_BATCH) -> int:
    """Mark up to ``most`` of the messages waiting above the mark and move the mark past them
    (inside a write transaction, SQLite); how many messages were marked."""
    mark = int(cur.execute(f"SELECT {MARKED_UP_TO}").fetchall()[0][0])
    _, last, messages = _fill(cur, most, mark, most)
    if last > mark:
        cur.execute(_MOVE_MARK, (MARK_KIND, last))
    return messages


def marked_rows(reader: SqlReader, mark_sql: str | None) -> Iterator[tuple[Any, ...]]:
    """``message_marks``' rows ordered by message and mark, with those of the messages waiting above
    the mark (``mark_sql``, SQLite's :data:`MARKED_UP_TO`; ``None``: nothing waits) as a catch-up
    will write them."""
    mark = 0 if mark_sql is None else int(reader.execute(f"SELECT {mark_sql}").fetchall()[0][0])
    if mark_sql is None:
        yield from reader.execute("SELECT message_id, mark FROM message_marks ORDER BY 1, 2")
        return
    yield from reader.execute("SELECT message_id, mark FROM message_marks WHERE message_id <= ? ORDER BY 1, 2",
                              (mark,))
    above = {(int(i), str(m)) for i, m in reader.execute(
        "SELECT message_id, mark FROM message_marks WHERE message_id > ?", (mark,))}
    above.update(_stored_rows(reader.execute(
        "SELECT id, content, created_at FROM messages WHERE id > ? ORDER BY id", (mark,)).fetchall()))
    yield from sorted(above)
