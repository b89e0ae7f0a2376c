"""The words of any user text that a full-text search looks for (R-FTS), on every dialect:
distinct word tokens, lower-cased, stop words dropped unless nothing else is left. A dialect
quotes each one for its own query syntax (FTS5's strings, PostgreSQL's ``plainto_tsquery``
parameters): user text never reaches a query language raw.
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
