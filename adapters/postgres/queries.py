"""The read side (``MemoryQueries`` and the host's queries) on PostgreSQL: the shared SQL
(``adapters.sql.queries``), and full-text search on the ``tsvector`` columns.

Any text is a safe query: it is split into words (``sql.search_terms.query_terms``), and each word is a
bound parameter of ``plainto_tsquery`` (which reads it as plain text, never as operators); user
text never reaches ``to_tsquery``. History search puts the scope inside the index as on SQLite:
the scope's opaque token is a lexeme of each message's ``search`` vector, so the GIN index
answers "this scope AND one of these words" and a conversation's recall reads that conversation's
matches only. A recall's page (ranking, rows, snippets, the turn after a question) is one
statement (ADR-0029, "Recall round trips").
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Sequence
from typing import Any

from fermix_memory.adapters.postgres.event_store import PostgresEventStore
from fermix_memory.adapters.sql.history import add_hit
from fermix_memory.adapters.sql.queries import SqlQueries
from fermix_memory.adapters.sql.read_side import clamp_limit
from fermix_memory.adapters.sql.rows import MESSAGE_FIELDS, memory_columns, memory_from_row, message_from_row
from fermix_memory.adapters.sql.scope_sql import scope_sql
from fermix_memory.adapters.sql.scope_tokens import search_scope_token
from fermix_memory.adapters.sql.search_terms import query_terms
from fermix_memory.application.query_ports import MemoryHit, MessageHit
from fermix_memory.application.recall_hop import HOP_MIN_WORDS
from fermix_memory.domain.messages import QUESTION_MARKS
from fermix_memory.domain.query_words import content_words
from fermix_memory.domain.scopes import HistoryFilter, MemoryFilter

HEADLINE = "StartSel=[, StopSel=], MaxWords=12, MinWords=3, ShortWord=2"
CANDIDATES_PER_RESULT = 4


def any_word(terms: list[str], config: str = "english") -> str:
    """A tsquery matching any of ``terms``, each a bound parameter of ``plainto_tsquery``."""
    return "(" + " || ".join(f"plainto_tsquery('{config}', ?)" for _ in terms) + ")"


class PostgresQueries(SqlQueries):
    """Implements ``MemoryQueries`` (and the host's read side) on a :class:`PostgresEventStore`;
    its reader translates the driver's errors itself."""

    def __init__(self, store: PostgresEventStore) -> None:
        super().__init__(store.reader)
        self._store = store
        # The marks the last history search of this thread read with its candidates, for the
        # second hop's ``marks_of`` right after it (read once, see :meth:`marks_of`).
        self._searched = threading.local()

    def _prepared(self, sql: str, params: list[Any]) -> list[tuple[Any, ...]]:
        """Rows of a search statement, prepared on its connection from its first run (see
        :class:`~fermix_memory.adapters.postgres.connection.PgCursor`): a recall is planned once
        per connection and shape, not at each of its first runs."""
        return self._store.rows(sql, params, prepare=True)

    def search_memories(self, query: str, where: MemoryFilter, limit: int) -> list[MemoryHit]:
        terms = query_terms(query)
        if not terms or clamp_limit(limit) == 0:
            return []
        sql, params = scope_sql(where, "m")
        rows = self._prepared(  # the query computed once (see ``history_search_sql``)
            f"WITH q AS MATERIALIZED (SELECT {any_word(terms)} AS q)"
            f" SELECT {memory_columns('m')}, ts_rank(m.search, q.q), ts_headline('english', m.value, q.q, '{HEADLINE}')"
            f" FROM q, memories m WHERE m.search @@ q.q AND {sql}"
            " AND m.archived_at IS NULL ORDER BY 10 - ts_rank(m.search, q.q), m.id DESC LIMIT ?",
            [*terms, *params, clamp_limit(limit)],
        )
        # Ranks as on SQLite: lower is better.
        return [MemoryHit(memory=memory_from_row(r[:-2]), rank=-float(r[-2]), snippet=r[-1]) for r in rows]

    def search_history(self, query: str, where: HistoryFilter, limit: int) -> list[MessageHit]:
        """The scope's turns matching ``query`` by text or sender, best first (ties: newer); a
        matching question brings the turn after it (ADR-0019). One statement in the usual case:
        the scope's first ``n`` candidates, each with its snippet and the turn after it, each one
        a hit or already shown as the reply of one before it, so they suffice when the reader may
        see them all. Only when they do not (some were not the reader's) does a second statement
        read the rest of the best ``CANDIDATES_PER_RESULT * n + 2``, ranked after the last one."""
        terms = query_terms(query)
        n = clamp_limit(limit)
        searched = self._searched
        searched.marks = None
        if not terms or n == 0:
            return []
        # A question the second hop expands (``recall_hop``) asks next for its best turns' marks:
        # they come with the candidates, not in a statement of their own. (A question of fewer
        # terms than that rarely has the content words: its marks, if asked for, come from the store.)
        expands = len(terms) >= HOP_MIN_WORDS and len(content_words(query)) >= HOP_MIN_WORDS
        if expands:
            self._marked()
        conversation = where.conversation
        scope = [where.agent_id, where.owner_id] if conversation is None else [
            where.agent_id, where.owner_id, conversation.channel, conversation.chat_id, conversation.thread_scope]
        head = [search_scope_token(where), *terms, *scope]
        rows = self._prepared(history_search_sql(len(terms), len(scope), marks=expands), [*head, n, _ASKS])
        marks: dict[int, tuple[str, ...]] | None = {} if expands else None
        hits: list[MessageHit] = []
        shown: set[int] = set()
        _add_hits(rows, where, n, hits, shown, marks)
        total = CANDIDATES_PER_RESULT * n + 2
        if len(hits) < n and len(rows) == n < total:
            more = self._prepared(history_search_sql(len(terms), len(scope), after=True, marks=expands),
                                  [*head, rows[-1][0], rows[-1][1], total - n, _ASKS])
            _add_hits(more, where, n, hits, shown, marks)
        searched.marks = marks
        return hits

    def marks_of(self, message_ids: Sequence[int]) -> dict[int, tuple[str, ...]]:
        """As ``MarkQueries.marks_of``; right after a history search that read the marks of its
        candidates (a question the second hop expands), those of its candidates come from it,
        once: any other asks the store."""
        kept, self._searched.marks = getattr(self._searched, "marks", None), None
        if kept is None or not kept.keys() >= set(message_ids):
            return super().marks_of(message_ids)
        return {i: kept[i] for i in sorted(set(message_ids)) if kept[i]}


# A candidate row: its score, its message's columns, its snippet, the columns of the turn after
# it (all NULL when there is none), then (a search reading marks) its marks.
_WIDTH = len(MESSAGE_FIELDS)
_SNIPPET = 1 + _WIDTH
_AFTER = slice(2 + _WIDTH, 2 + 2 * _WIDTH)


def _add_hits(rows: Sequence[tuple[Any, ...]], where: HistoryFilter, n: int, hits: list[MessageHit],
              shown: set[int], marks: dict[int, tuple[str, ...]] | None) -> None:
    """The hits of candidate ``rows`` (best first) until there are ``n``: each one's, and the
    turn after it when it asks something, unless ``where`` may not see them (``add_hit``).
    ``marks``: each row's marks kept by message id."""
    for row in rows:
        if marks is not None:
            marks[row[1]] = tuple(row[-1])
        add_hit(hits, shown, where, n, message_from_row(row[1:_SNIPPET]), row[0], row[_SNIPPET], row[_AFTER])
        if len(hits) >= n:
            return


# A history scope's columns: an owner's, then a conversation's.
_SCOPE_COLUMNS = ("agent_id", "owner_id", "channel", "chat_id", "thread_scope")
# The turn after a candidate is read only for one that may ask something (``is_question`` decides).
_ASKS = f"[{QUESTION_MARKS}]"


@functools.lru_cache(maxsize=128)
def history_search_sql(terms: int, scope: int, *, after: bool = False, marks: bool = False) -> str:
    """The scope's best candidates by ``ts_rank`` (ties: newer; ``after``: only those ranked after
    a given (score, id)), each with its snippet and the turn after it in its conversation (NULLs
    when it is the last, or when it asks nothing). Parameters: the scope token, the ``terms``
    words, the ``scope`` columns' values (agent, owner, then channel, chat and thread for a
    conversation), (``after``: the score and id), the number of candidates, the pattern of a
    question mark. ``marks``: each row ends with the candidate's marks, sorted (``marks_of``'s).

    The scope is asked twice: its token in the full-text query lets the GIN index answer for a
    large table; its columns, equal to the reader's (what ``sql.history.visible`` checks), are cheap to
    test first when the planner scans the table instead (a small one), and keep rows of a
    colliding token out of the candidates. The query is computed once, in a materialised CTE:
    inlined, a generic plan (a prepared statement run often) would parse the words again for
    every row it scans. The ranking carries each candidate's columns from the scan that tests it
    (its row is read there anyway): no second read of the kept rows by id. The snippet and the
    turn after are computed above the LIMIT, so only for the rows returned."""
    columns_equal = " AND ".join(f"s.{c} = ?" for c in _SCOPE_COLUMNS[:scope])
    columns = ", ".join(f"m.{c}" for c in MESSAGE_FIELDS)
    following = ", ".join(f"x.{c}" for c in MESSAGE_FIELDS)
    return (
        f"WITH q AS MATERIALIZED (SELECT w.words, plainto_tsquery('simple', ?) && w.words AS match"
        f" FROM (SELECT {any_word([''] * terms)} AS words) w)"
        f" SELECT m.score, {columns}, ts_headline('english', m.content, m.words, '{HEADLINE}'), {following}"
        + (", ARRAY(SELECT k.mark FROM message_marks k WHERE k.message_id = m.id ORDER BY k.mark)" if marks else "")
        + f" FROM (SELECT {', '.join(f's.{c}' for c in MESSAGE_FIELDS)}, ts_rank(s.search, q.words) AS score, q.words"
        f"  FROM q, messages s WHERE {columns_equal} AND s.search @@ q.match"
        + (" AND (ts_rank(s.search, q.words), s.id) < (?::real, ?)" if after else "")
        + "  ORDER BY score DESC, s.id DESC LIMIT ?) m"
        " LEFT JOIN LATERAL (SELECT * FROM messages y WHERE m.content ~ ? AND y.agent_id = m.agent_id"
        "  AND y.channel = m.channel AND y.chat_id = m.chat_id AND y.thread_scope = m.thread_scope"
        "  AND (y.created_at, y.id) > (m.created_at, m.id) ORDER BY y.created_at, y.id LIMIT 1) x ON true"
        " ORDER BY m.score DESC, m.id DESC")
