"""The read side (``MemoryQueries``) on SQLite: the shared SQL (``adapters.sql.queries``) and
full-text search on FTS5 (memory rows here, history in ``history_search``)."""

from __future__ import annotations

import functools
from collections.abc import Callable

import apsw

from fermix_memory.adapters.sql.queries import SqlQueries
from fermix_memory.adapters.sql.read_side import Reading, clamp_limit
from fermix_memory.adapters.sql.rows import memory_columns, memory_from_row
from fermix_memory.adapters.sql.scope_sql import scope_sql
from fermix_memory.adapters.sqlite.connection import translated_errors
from fermix_memory.adapters.sqlite.fts_query import match_expression
from fermix_memory.adapters.sqlite.history_search import HistorySearch
from fermix_memory.application.query_ports import MemoryHit
from fermix_memory.domain.scopes import MemoryFilter

# Around each read: apsw's errors as the application's, naming the store.
sqlite_reading: Reading = functools.partial(translated_errors, "reading memory.db")


class SqliteQueries(HistorySearch, SqlQueries):
    """Implements ``MemoryQueries`` on this thread's read connection of a SQLite store."""

    def __init__(self, connection: Callable[[], apsw.Connection]) -> None:
        super().__init__(connection, sqlite_reading)

    def search_memories(self, query: str, where: MemoryFilter, limit: int) -> list[MemoryHit]:
        expr = match_expression(query)
        if expr is None or clamp_limit(limit) == 0:
            return []
        sql, params = scope_sql(where, "m")
        rows = self._rows(
            f"SELECT {memory_columns('m')}, f.rank, snippet(memories_fts, 1, '[', ']', '…', 12) FROM memories_fts f"
            f" JOIN memories m ON m.id = f.rowid WHERE memories_fts MATCH ? AND {sql}"
            " AND m.archived_at IS NULL ORDER BY f.rank LIMIT ?",
            [expr, *params, clamp_limit(limit)],
        )
        return [MemoryHit(memory=memory_from_row(r[:-2]), rank=float(r[-2]), snippet=r[-1]) for r in rows]
