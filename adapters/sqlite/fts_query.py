"""Turning any user text into a safe FTS5 query (R-FTS).

User text never reaches ``MATCH`` raw: it is split into word tokens, each quoted as an FTS5
string (``"`` doubled), and joined with ``OR`` so bm25 ranks rows matching more terms first.
Operators such as ``AND``, ``NEAR``, ``*`` or ``-`` become plain quoted words or vanish.
"""

from __future__ import annotations

import re

MAX_TERMS = 32
# Words too common to say anything about what is wanted; dropped unless nothing else is left.
STOPWORDS = frozenset((
    "a", "about", "above", "after", "again", "against", "all", "am", "an", "and", "any", "are", "as", "at",
    "be", "because", "been", "before", "being", "below", "between", "both", "but", "by", "can", "could",
    "did", "do", "does", "doing", "down", "during", "each", "few", "for", "from", "further", "had", "has",
    "have", "having", "he", "her", "here", "hers", "herself", "him", "himself", "his", "how", "i", "if", "in",
    "into", "is", "it", "its", "itself", "just", "me", "more", "most", "my", "myself", "no", "nor", "not",
    "of", "off", "on", "once", "only", "or", "other", "our", "ours", "ourselves", "out", "over", "own",
    "same", "she", "should", "so", "some", "such", "than", "that", "the", "their", "theirs", "them",
    "themselves", "then", "there", "these", "they", "this", "those", "through", "to", "too", "under", "until",
    "up", "very", "was", "we", "were", "what", "when", "where", "which", "while", "who", "whom", "why",
    "will", "with", "would", "you", "your", "yours", "yourself", "yourselves",
))
MAX_TERM_CHARS = 64
_WORD = re.compile(r"\w+", re.UNICODE)


def quote_term(term: str) -> str:
    return '"' + term.replace('"', '""') + '"'


def query_terms(text: str) -> list[str]:
    """Distinct word tokens of ``text``, in order, at most :data:`MAX_TERMS`."""
    if not isinstance(text, str):
        return []
    seen: dict[str, None] = {}
    for match in _WORD.finditer(text[:20_000]):
        word = match.group(0).replace("_", " ").strip()
        for part in word.split():
            if part:
                seen.setdefault(part[:MAX_TERM_CHARS].lower(), None)
        if len(seen) >= MAX_TERMS:
            break
    terms = list(seen)[:MAX_TERMS]
    meaningful = [t for t in terms if t not in STOPWORDS]
    return meaningful or terms


def match_expression(text: str, *, column: str | None = None) -> str | None:
    """An FTS5 expression matching any term of ``text`` (``None`` when there is no term)."""
    terms = query_terms(text)
    if not terms:
        return None
    expr = " OR ".join(quote_term(t) for t in terms)
    return f"{column} : ({expr})" if column else expr
