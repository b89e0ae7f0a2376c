"""Keeping ``messages_fts`` in few segments (the ``SearchIndex`` port, ADR-0020).

FTS5 writes a new segment per transaction and merges them as later writes come (``automerge``);
a chat's index, written one message per transaction, holds 5-15 segments, and each term of a
query is looked up in every one of them. A merge step here runs in a write of its own through
the store's writer queue and merges at most :data:`PAGES_PER_STEP` pages: first any level of
two or more segments (FTS5's ``merge`` with ``usermerge`` 2, set by schema migration 4); when
none is left and the whole index is small (:data:`SMALL_INDEX_PAGES`), all segments into one
(a negative ``merge``: FTS5's incremental ``optimize``).
"""

from __future__ import annotations

from typing import Any

from fermix_memory.adapters.sqlite.event_store import SqliteEventStore
from fermix_memory.adapters.sqlite.transaction import SqliteTransaction

PAGES_PER_STEP = 32
# Up to this many pages (~1 MB, some 20,000 chat messages) the index is kept in one segment:
# merging it whole costs a few milliseconds of background work. Above, levels are merged only.
SMALL_INDEX_PAGES = 256
# FTS5's structure record (which segments make the index): it changes when a step merged.
_STRUCTURE = "SELECT block FROM messages_fts_data WHERE id = 10"
_MERGE = "INSERT INTO messages_fts(messages_fts, rank) VALUES ('merge', ?)"
_PAGES_UP_TO = "SELECT count(*) FROM (SELECT 1 FROM messages_fts_data LIMIT ?)"


class SqliteSearchIndex:
    """``SearchIndex`` on one store."""

    def __init__(self, store: SqliteEventStore) -> None:
        self._store = store

    def merge_step(self) -> bool:
        return self._store.write(_merge, upkeep=True)


def _merge(tx: SqliteTransaction) -> bool:
    cursor = tx.cursor
    before: list[Any] = cursor.execute(_STRUCTURE).fetchall()
    cursor.execute(_MERGE, (PAGES_PER_STEP,))
    after: list[Any] = cursor.execute(_STRUCTURE).fetchall()
    if after == before and is_small(cursor):
        cursor.execute(_MERGE, (-PAGES_PER_STEP,))
        after = cursor.execute(_STRUCTURE).fetchall()
    return after != before


def is_small(conn: Any) -> bool:
    """Whether ``messages_fts`` has at most :data:`SMALL_INDEX_PAGES` pages (counted no further)."""
    return int(conn.execute(_PAGES_UP_TO, (SMALL_INDEX_PAGES + 1,)).fetchall()[0][0]) <= SMALL_INDEX_PAGES
