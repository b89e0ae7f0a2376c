"""History search (``MemoryQueries.search_history``) on the read connection: scope-own ranking
(``history_rank``), and the reply brought along with a matching question (ADR-0019)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, cast

import apsw

from fermix_memory.adapters.sql.history import add_hit, visible
from fermix_memory.adapters.sql.read_side import ReadSide, clamp_limit
from fermix_memory.adapters.sql.rows import MESSAGE_FIELDS, message_from_row
from fermix_memory.adapters.sql.scope_tokens import search_scope_token
from fermix_memory.adapters.sql.search_terms import query_terms
from fermix_memory.adapters.sqlite import history_rank
from fermix_memory.adapters.sqlite.fts_query import quote_term
from fermix_memory.adapters.sqlite.history_rank import (
    FILL_CANDIDATES_PER_RESULT,
    MAX_CANDIDATES,
    SCORE_FUNCTION,
    candidate_terms,
    idf,
    reference_length,
)
from fermix_memory.application.query_ports import MessageHit
from fermix_memory.domain.messages import Message
from fermix_memory.domain.scopes import HistoryFilter

# A batch of turns (ids bound as one JSON array), each with the turn after it in its
# conversation's order (NULLs when it is the last), in one statement.
_BATCH_SQL = (
    f"SELECT {', '.join('m.' + c for c in MESSAGE_FIELDS)}, {', '.join('n.' + c for c in MESSAGE_FIELDS)}"
    " FROM messages m LEFT JOIN messages n ON n.id = ("
    "  SELECT x.id FROM messages x WHERE x.agent_id = m.agent_id AND x.channel = m.channel"
    "  AND x.chat_id = m.chat_id AND x.thread_scope = m.thread_scope"
    "  AND (x.created_at, x.id) > (m.created_at, m.id) ORDER BY x.created_at, x.id LIMIT 1)"
    " WHERE m.id IN (SELECT value FROM json_each(?))"
)


class HistorySearch(ReadSide):
    """``search_history`` of the query adapter. ``before_full_text``, when set, is called before
    each full-text read (history here, memory rows in ``queries``): it writes the entries of the
    rows that waited for them (ADR-0091), so a search finds every committed message and row."""

    before_full_text: Callable[[], object] | None = None

    def _full_text_ready(self) -> None:
        if self.before_full_text is not None:
            self.before_full_text()

    def search_history(self, query: str, where: HistoryFilter, limit: int) -> list[MessageHit]:
        """The scope's turns matching ``query`` by text or sender, ranked with the scope's own
        statistics (``history_rank``); a matching question brings the turn after it (ADR-0019)."""
        terms = query_terms(query)
        n = clamp_limit(limit)
        if not terms or n == 0:
            return []
        self._full_text_ready()
        token = search_scope_token(where)
        scope = quote_term(token)
        scope_size, chars, *counts = self._counts(
            token, [f"scope_tokens : {scope} AND {{content sender}} : {quote_term(t)}" for t in terms])
        # A word absent from the scope matches none of its rows.
        found = [(t, df) for t, df in zip(terms, counts, strict=True) if df]
        if not found:
            return []
        frequencies = [df for _, df in found]
        ranked = self._scope_ranked(scope, [t for t, _ in found], [idf(df, scope_size) for df in frequencies],
                                    candidate_terms(frequencies, scope_size, n), n,
                                    reference_length(scope_size, chars))
        tokenize = history_rank.tokenizer(cast(apsw.Connection, self._conn()))  # SQLite's reader is apsw's
        wanted = history_rank.stems(tokenize, terms)
        hits: list[MessageHit] = []
        shown: set[int] = set()
        for start in range(0, len(ranked), n + 2):
            for message, score, after in self._ranked_messages(ranked[start:start + n + 2]):
                if visible(message, where) and message.id not in shown:  # else no snippet is wanted
                    add_hit(hits, shown, where, n, message, score,
                            history_rank.snippet(tokenize, message.content, wanted), after)
                if len(hits) >= n:
                    return hits[:n]
        return hits

    def _scope_ranked(self, scope: str, terms: list[str], weights: list[float], chosen: list[int],
                      n: int, reference: float) -> list[tuple[int, float]]:
        """(rowid, score) of the scope's rows matching a ``chosen`` term, best first, with every
        term scored (lengths against ``reference``, the scope's average turn); when that leaves
        fewer than ``n`` rows, of the rows matching any term."""
        within = f"scope_tokens : {scope}"
        rest = [i for i in range(len(terms)) if i not in chosen]
        if rest and chosen:
            # The other terms are phrases of the query too (so they are scored), in a group every
            # row of the scope satisfies; the score's arguments follow the phrases' order.
            match = (f"{within} AND {_any_of(terms, chosen)} AND ({within} OR {_any_of(terms, rest)})")
            args = [*(weights[i] for i in chosen), 0.0, *(weights[i] for i in rest)]
            ranked = self._scored(match, reference, args, MAX_CANDIDATES)
            if len(ranked) >= n:
                return ranked
            # Too few: the rest of the list comes from the newest rows holding only commoner words.
            match = f"{within} AND {_any_of(terms, rest)} NOT {_any_of(terms, chosen)}"
            filler = self._scored(match, reference, [*(weights[i] for i in rest), *(weights[i] for i in chosen)],
                                  FILL_CANDIDATES_PER_RESULT * n)
            return sorted(ranked + filler, key=lambda hit: (-hit[1], -hit[0]))
        return self._scored(f"{within} AND {_any_of(terms, range(len(terms)))}", reference, weights,
                            MAX_CANDIDATES)

    def _scored(self, match: str, reference: float, weights: list[float], newest: int) -> list[tuple[int, float]]:
        """(rowid, score) of the ``newest`` rows matching ``match``, best first (ties: newer)."""
        marks = ", ".join("?" * (1 + len(weights)))
        return [(int(r[0]), float(r[1])) for r in self._rows(
            f"SELECT rowid, s FROM (SELECT rowid, {SCORE_FUNCTION}(messages_fts, {marks}) AS s FROM messages_fts"
            " WHERE messages_fts MATCH ? ORDER BY rowid DESC LIMIT ?) ORDER BY s DESC, rowid DESC",
            (reference, *weights, match, newest))]

    def _counts(self, token: str, exprs: list[str]) -> list[int]:
        """The number of messages carrying scope ``token`` and their characters (kept by the
        schema's triggers, read in one lookup), then how many rows match each expression, in one
        statement (one snapshot)."""
        one = ", (SELECT count(*) FROM messages_fts WHERE messages_fts MATCH ?)"
        return [int(c or 0) for c in self._rows(
            f"SELECT s.messages, s.chars{one * len(exprs)} FROM (SELECT NULL)"
            " LEFT JOIN scope_sizes s ON s.token = ?", (*exprs, token))[0]]

    def _ranked_messages(self, batch: list[tuple[int, float]]
                         ) -> list[tuple[Message, float, tuple[Any, ...]]]:
        """The messages of ``batch`` (rowid, score), in its order, each with the row of the turn
        after it (all ``None`` when there is none), read into a ``Message`` only when wanted."""
        rows = self._rows(_BATCH_SQL, (f"[{','.join(str(rowid) for rowid, _ in batch)}]",))
        width = len(MESSAGE_FIELDS)
        by_id = {int(r[0]): r for r in rows}
        return [(message_from_row(by_id[rowid][:width]), score, by_id[rowid][width:])
                for rowid, score in batch if rowid in by_id]


def _any_of(terms: list[str], indexes: Iterable[int]) -> str:
    return f"{{content sender}} : ({' OR '.join(quote_term(terms[i]) for i in indexes)})"
