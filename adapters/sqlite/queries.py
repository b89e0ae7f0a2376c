"""The read side (``MemoryQueries``) on SQLite: the shared SQL (``adapters.sql.queries``) and
full-text search on FTS5 (memory rows here, history in ``history_search``)."""

from __future__ import annotations

import functools
from collections.abc import Callable

import apsw

from fermix_memory.adapters.sql.queries import SqlQueries, window_tail_sql
from fermix_memory.adapters.sql.read_side import Reading, clamp_limit
from fermix_memory.adapters.sql.rows import CONVERSATION_MESSAGE_COLUMNS, memory_columns, memory_from_row
from fermix_memory.adapters.sql.scope_sql import scope_sql
from fermix_memory.adapters.sqlite.connection import translated_errors, typed_error
from fermix_memory.adapters.sqlite.fts_query import match_expression
from fermix_memory.adapters.sqlite.history_search import HistorySearch
from fermix_memory.adapters.sqlite.json_numbers import number_sql
from fermix_memory.application.query_ports import MemoryHit, WindowAtPosition
from fermix_memory.domain.scopes import MemoryFilter
from fermix_memory.domain.values import ConversationKey

# Around each read: apsw's errors as the application's, naming the store.
READING = "reading memory.db"
sqlite_reading: Reading = functools.partial(translated_errors, READING)

# A window and the log's position in one statement (ADR-0062). Its first row, the head, holds the
# log's last position (as ``last_position`` reads it) and the checkpoint of the conversation's
# state row; the messages after the window's start (as ``stored_messages``) follow, unless the
# position is ?5 (a kept window's freshness check: the log has not moved, the head is enough; the
# seek's key is then NULL, and the index is not even entered). The head sorts first: its
# ``created_at`` (column 8) is NULL, below any text, or, newest first, a blob, above any. Each side
# of the compound comes in index order (``messages_by_conversation``): merged, never sorted.
# ``+?``: SQLite (3.54) prepares a statement again at each run when a bare parameter is compared
# to an indexed column or is the LIMIT of an ordered read; an expression of it is not.
_STATE = ("(SELECT {} FROM conversation_state"
          " WHERE agent_id = +?1 AND channel = +?2 AND chat_id = +?3 AND thread_scope = +?4)")
_POSITION = "(SELECT coalesce(max(position), 0) FROM events)"
_WINDOW_HEAD = f"SELECT {_POSITION}, {_STATE.format('checkpoint_message_id')}, NULL, NULL, NULL, NULL, NULL, {{}}, NULL"
_WINDOW_ROWS = (
    f" UNION ALL SELECT {CONVERSATION_MESSAGE_COLUMNS} FROM messages WHERE agent_id = iif({_POSITION} IS ?5, NULL, ?1)"
    " AND channel = +?2 AND chat_id = +?3 AND thread_scope = +?4"
    f" AND id > coalesce({_STATE.format('window_start_id')}, 0)"
)
WINDOW_AT_POSITION_SQL = _WINDOW_HEAD.format("NULL") + _WINDOW_ROWS + " ORDER BY 8, 1"
NEWEST_AT_POSITION_SQL = _WINDOW_HEAD.format("X''") + _WINDOW_ROWS + " ORDER BY 8 DESC, 1 DESC LIMIT +?6"


class SqliteQueries(HistorySearch, SqlQueries):
    """Implements ``MemoryQueries`` on this thread's read connection of a SQLite store."""

    window_tail_sql = window_tail_sql("+?")  # prepared once, not at every run (see ``_STATE`` above)
    prompt_files_bound = "+"  # the same for the owner's prompt files (``prompt_files_sql``)
    number_sql = staticmethod(number_sql)

    def __init__(self, connection: Callable[[], apsw.Connection]) -> None:
        super().__init__(connection, sqlite_reading)

    def window_at_position(self, agent_id: str, conversation: ConversationKey, limit: int | None,
                           unless_at: int | None) -> WindowAtPosition:
        """The log's last position, the checkpoint of the conversation's state and its window (as
        ``stored_messages`` after its start: the newest ``limit`` when given), in one statement, one
        snapshot; the window is not read when the position is ``unless_at`` (``rows`` None)."""
        key = (agent_id, conversation.channel, conversation.chat_id, conversation.thread_scope, unless_at)
        try:  # as ``sqlite_reading``, without a context manager's generator on the prompt's one statement
            if limit is None:
                rows = self._conn().execute(WINDOW_AT_POSITION_SQL, key).fetchall()
                messages = rows[1:]
            else:
                rows = self._conn().execute(NEWEST_AT_POSITION_SQL, (*key, max(0, limit) + 1)).fetchall()
                messages = rows[:0:-1]
        except apsw.Error as exc:
            raise typed_error(READING, exc) from exc
        position, checkpoint = rows[0][0], rows[0][1]
        if position == unless_at:
            return WindowAtPosition(position, checkpoint, None)
        return WindowAtPosition(position, checkpoint, messages)  # named where read by name (caches.py)

    def search_memories(self, query: str, where: MemoryFilter, limit: int) -> list[MemoryHit]:
        expr = match_expression(query)
        if expr is None or clamp_limit(limit) == 0:
            return []
        self._full_text_ready()  # the rows added since the last catch-up (ADR-0091)
        sql, params = scope_sql(where, "m")
        rows = self._rows(
            f"SELECT {memory_columns('m')}, f.rank, snippet(memories_fts, 1, '[', ']', '…', 12) FROM memories_fts f"
            f" JOIN memories m ON m.id = f.rowid WHERE memories_fts MATCH ? AND {sql}"
            " AND m.archived_at IS NULL ORDER BY f.rank LIMIT ?",
            [expr, *params, clamp_limit(limit)],
        )
        return [MemoryHit(memory=memory_from_row(r[:-2]), rank=float(r[-2]), snippet=r[-1]) for r in rows]
