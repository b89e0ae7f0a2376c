"""Turning any user text into a safe FTS5 query (R-FTS).

User text never reaches ``MATCH`` raw: it is split into word tokens, each quoted as an FTS5
string (``"`` doubled), and joined with ``OR`` so bm25 ranks rows matching more terms first.
Operators such as ``AND``, ``NEAR``, ``*`` or ``-`` become plain quoted words or vanish.
"""

from __future__ import annotations

from fermix_memory.adapters.sql.search_terms import query_terms


def quote_term(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def match_expression(text: str, *, column: str | None = None) -> str | None:
    """An FTS5 expression matching any term of ``text`` (``None`` when there is no term)."""
    terms = query_terms(text)
    if not terms:
        return None
    expr = " OR ".join(quote_term(t) for t in terms)
    return f"{column} : ({expr})" if column else expr
