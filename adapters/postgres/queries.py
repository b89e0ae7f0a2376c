"""The read side (``MemoryQueries`` and the host's queries) on PostgreSQL: the SQLite read side's
SQL where it is plain SQL, full-text search on the ``tsvector`` columns where it is not.

Any text is a safe query: it is split into words (``fts_query.query_terms``), and each word is a
bound parameter of ``plainto_tsquery`` (which reads it as plain text, never as operators); user
text never reaches ``to_tsquery``. History search puts the scope inside the index as on SQLite:
the scope's opaque token is a lexeme of each message's ``search`` vector, so the GIN index
answers "this scope AND one of these words" and a conversation's recall reads that conversation's
matches only.
"""

from __future__ import annotations

from typing import Any, cast

from fermix_memory.adapters.postgres.event_store import PostgresEventStore
from fermix_memory.adapters.sqlite.fts_query import query_terms
from fermix_memory.adapters.sqlite.history_search import _context_snippet, _visible
from fermix_memory.adapters.sqlite.queries import SqliteQueries, _scope_sql
from fermix_memory.adapters.sqlite.read_side import clamp_limit
from fermix_memory.adapters.sqlite.rows import MESSAGE_FIELDS, memory_columns, memory_from_row, message_from_row
from fermix_memory.adapters.sqlite.scope_tokens import search_scope_token
from fermix_memory.application.ports import MemoryHit, MessageHit
from fermix_memory.domain.messages import is_question
from fermix_memory.domain.scopes import HistoryFilter, MemoryFilter

HEADLINE = "StartSel=[, StopSel=], MaxWords=12, MinWords=3, ShortWord=2"
CANDIDATES_PER_RESULT = 4


def any_word(terms: list[str], config: str = "english") -> str:
    """A tsquery matching any of ``terms``, each a bound parameter of ``plainto_tsquery``."""
    return "(" + " || ".join(f"plainto_tsquery('{config}', ?)" for _ in terms) + ")"


class PostgresQueries(SqliteQueries):
    """Implements ``MemoryQueries`` (and the host's read side) on a :class:`PostgresEventStore`."""

    def __init__(self, store: PostgresEventStore) -> None:
        super().__init__(cast(Any, store.reader))

    def search_memories(self, query: str, where: MemoryFilter, limit: int) -> list[MemoryHit]:
        terms = query_terms(query)
        if not terms or clamp_limit(limit) == 0:
            return []
        sql, params = _scope_sql(where, "m")
        rows = self._rows(
            f"SELECT {memory_columns('m')}, ts_rank(m.search, q.q), ts_headline('english', m.value, q.q, '{HEADLINE}')"
            f" FROM memories m, (SELECT {any_word(terms)} AS q) q WHERE m.search @@ q.q AND {sql}"
            " AND m.archived_at IS NULL ORDER BY 10 - ts_rank(m.search, q.q), m.id DESC LIMIT ?",
            [*terms, *params, clamp_limit(limit)],
        )
        # Ranks as on SQLite: lower is better.
        return [MemoryHit(memory=memory_from_row(r[:-2]), rank=-float(r[-2]), snippet=r[-1]) for r in rows]

    def search_history(self, query: str, where: HistoryFilter, limit: int) -> list[MessageHit]:
        """The scope's turns matching ``query`` by text or sender, best first (ties: newer); a
        matching question brings the turn after it (ADR-0019)."""
        terms = query_terms(query)
        n = clamp_limit(limit)
        if not terms or n == 0:
            return []
        token = search_scope_token(where)
        columns = ", ".join(f"m.{c}" for c in MESSAGE_FIELDS)
        after = ", ".join(f"x.{c}" for c in MESSAGE_FIELDS)
        rows = self._rows(
            f"SELECT {columns}, h.score, ts_headline('english', m.content, h.q, '{HEADLINE}'), {after} FROM ("
            f"  SELECT s.id, ts_rank(s.search, q.words) AS score, q.words AS q"
            f"  FROM messages s, (SELECT {any_word(terms)} AS words, plainto_tsquery('simple', ?) AS scope) q"
            "   WHERE s.search @@ (q.scope && q.words) ORDER BY score DESC, s.id DESC LIMIT ?) h"
            " JOIN messages m ON m.id = h.id"
            " LEFT JOIN LATERAL (SELECT * FROM messages y WHERE y.agent_id = m.agent_id AND y.channel = m.channel"
            "  AND y.chat_id = m.chat_id AND y.thread_scope = m.thread_scope"
            "  AND (y.created_at, y.id) > (m.created_at, m.id) ORDER BY y.created_at, y.id LIMIT 1) x ON true"
            " ORDER BY h.score DESC, m.id DESC",
            [*terms, token, CANDIDATES_PER_RESULT * n + 2],
        )
        width = len(MESSAGE_FIELDS)
        hits: list[MessageHit] = []
        shown: set[int] = set()
        for row in rows:
            message = message_from_row(row[:width])
            if not _visible(message, where) or message.id in shown:
                continue
            hits.append(MessageHit(message=message, rank=-float(row[width]), snippet=row[width + 1]))
            shown.add(message.id)
            reply = _reply(row[width + 2:]) if is_question(message.content) else None
            if len(hits) < n and reply is not None and reply.id not in shown and _visible(reply, where):
                hits.append(MessageHit(message=reply, rank=-float(row[width]), snippet=_context_snippet(reply),
                                       context_of=message.id))
                shown.add(reply.id)
            if len(hits) >= n:
                break
        return hits[:n]


def _reply(row: tuple[Any, ...]) -> Any:
    return message_from_row(row) if row[0] is not None else None
