"""Keeping ``messages_fts`` in few segments (the ``SearchIndex`` port, ADR-0020), and writing what
appends leave to the upkeep: messages' marks (ADR-0085), new rows' full-text entries (ADR-0091).

FTS5 writes a new segment per transaction and merges them as later writes come (``automerge``);
a chat's index, written one message per transaction, holds 5-15 segments, and each term of a
query is looked up in every one of them. A merge step here runs in a write of its own through
the store's writer queue and merges at most :data:`PAGES_PER_STEP` pages: first any level of
two or more segments (FTS5's ``merge`` with ``usermerge`` 2, set by schema migration 4); when
none is left, all segments into one (a negative ``merge``: FTS5's incremental ``optimize``) if
the whole index is small (:data:`SMALL_INDEX_PAGES`), if its other segments have grown to an
eighth of its largest one (:data:`GROWTH_BEFORE_WHOLE`), or if the step is told to (after a bulk
append); never while appends go on (a step told so).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from fermix_memory.adapters.sql.mark_writes import ANY_UNMARKED, FILL_BATCH, mark_new
from fermix_memory.adapters.sqlite.connection import scalar_int
from fermix_memory.adapters.sqlite.event_store import SqliteEventStore
from fermix_memory.adapters.sqlite.full_text_catch_up import ANY_WAITING, BATCH, index_new
from fermix_memory.adapters.sqlite.transaction import SqliteTransaction

PAGES_PER_STEP = 32
TEXT_BATCH = BATCH  # rows of each table given their full-text entries by one write of a catch-up
MARK_BATCH = FILL_BATCH  # messages marked by one write of a catch-up (some 50 ms of parsing)
# Up to this many pages (~1 MB, some 20,000 chat messages) the index is kept in one segment:
# merging it whole costs a few milliseconds of background work. Above, levels are merged only.
SMALL_INDEX_PAGES = 256
# Above, the whole index is merged into one segment once the pages of its other segments reach
# 1/GROWTH_BEFORE_WHOLE of its largest one's: a page is rewritten a few times more as the index
# grows (amortised), and a search looks in few segments at any size (a million messages: one
# whole merge, about 2 s of background work, took recall back to its figures at 100,000).
GROWTH_BEFORE_WHOLE = 8
# FTS5's structure record (which segments make the index): it changes when a step merged.
_STRUCTURE = "SELECT block FROM messages_fts_data WHERE id = 10"
_MERGE = "INSERT INTO messages_fts(messages_fts, rank) VALUES ('merge', ?)"
_PAGES_UP_TO = "SELECT count(*) FROM (SELECT 1 FROM messages_fts_data LIMIT ?)"
# The leaf pages of each segment, read in a few index lookups per segment: the segments, one
# after the other, and the page of each one's last term (``messages_fts_idx`` keeps the first
# term of each leaf page, and a page number shifted left by one).
_SEGMENT_PAGES = """
WITH RECURSIVE segment(id) AS (
    SELECT min(segid) FROM messages_fts_idx
    UNION ALL
    SELECT (SELECT min(segid) FROM messages_fts_idx WHERE segid > segment.id) FROM segment WHERE id IS NOT NULL)
SELECT (SELECT pgno FROM messages_fts_idx WHERE segid = segment.id ORDER BY term DESC LIMIT 1) >> 1
FROM segment WHERE id IS NOT NULL"""


class SqliteSearchIndex:
    """``SearchIndex`` on one store."""

    def __init__(self, store: SqliteEventStore) -> None:
        self._store = store

    def merge_step(self, *, whole: bool | None = None) -> bool:
        return self._store.write(_STEPS[whole], upkeep=True)

    def mark_messages(self, most: int | None = None) -> int:
        """The marks of the messages waiting above the mark (``sql.mark_writes``, ADR-0085), a
        write of :data:`MARK_BATCH` messages at a time, after the full-text entries of the rows
        waiting for theirs (:meth:`index_text`, ADR-0091); a read first tells whether any wait."""
        if self._store.readonly:
            return 0
        self.index_text()
        marked = 0
        while most is None or marked < most:
            if not scalar_int(self._store.reader(), ANY_UNMARKED):
                break
            step = MARK_BATCH if most is None else min(MARK_BATCH, most - marked)
            done = self._store.write(partial(_mark_new, most=step), upkeep=True)
            marked += done
            if done < step:  # all that waited when it ran: what came since waits for the next job
                break
        return marked


    def index_text(self) -> int:
        """The full-text entries of the messages and memory rows waiting above their marks
        (``full_text_catch_up``, ADR-0091), in writes of :data:`TEXT_BATCH` rows of each table;
        a read first tells whether any wait. Nothing on a store opened read-only."""
        if self._store.readonly:
            return 0
        indexed = 0
        while scalar_int(self._store.reader(), ANY_WAITING):
            done = self._store.write(_index_new, upkeep=True)
            indexed += done
            if done < TEXT_BATCH:  # all that waited when it ran: rows added since wait for the next
                break  # job (chasing a steady stream of writes would index them one commit at a time)
        return indexed


def _index_new(tx: SqliteTransaction) -> int:
    return index_new(tx.cursor, TEXT_BATCH)


def _mark_new(tx: SqliteTransaction, *, most: int) -> int:
    return mark_new(tx.cursor, most)


def _merge(tx: SqliteTransaction, *, whole: bool | None = None) -> bool:
    cursor = tx.cursor
    before: list[Any] = cursor.execute(_STRUCTURE).fetchall()
    cursor.execute(_MERGE, (PAGES_PER_STEP,))
    after: list[Any] = cursor.execute(_STRUCTURE).fetchall()
    if after == before and whole is not False and (whole or merges_whole(cursor)):
        cursor.execute(_MERGE, (-PAGES_PER_STEP,))
        after = cursor.execute(_STRUCTURE).fetchall()
    return after != before


_STEPS: dict[bool | None, Callable[[SqliteTransaction], bool]] = {
    whole: partial(_merge, whole=whole) for whole in (None, True, False)}


def merges_whole(conn: Any) -> bool:
    """Whether the index, with no level left to merge, is merged whole: small, or its other
    segments have grown to 1/:data:`GROWTH_BEFORE_WHOLE` of its largest."""
    if is_small(conn):
        return True
    pages = segment_pages(conn)
    largest = max(pages, default=0)
    return (sum(pages) - largest) * GROWTH_BEFORE_WHOLE >= largest > 0


def segment_pages(conn: Any) -> list[int]:
    """The leaf pages of each segment of ``messages_fts``, in the order of the segments' ids."""
    return [int(row[0] or 0) for row in conn.execute(_SEGMENT_PAGES).fetchall()]


def is_small(conn: Any) -> bool:
    """Whether ``messages_fts`` has at most :data:`SMALL_INDEX_PAGES` pages (counted no further)."""
    return int(conn.execute(_PAGES_UP_TO, (SMALL_INDEX_PAGES + 1,)).fetchall()[0][0]) <= SMALL_INDEX_PAGES
