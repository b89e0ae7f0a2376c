"""The words of any user text that a full-text search looks for (R-FTS), on every dialect:
distinct word tokens, lower-cased, stop words dropped unless nothing else is left. A dialect
quotes each one for its own query syntax (FTS5's strings, PostgreSQL's ``plainto_tsquery``
parameters): user text never reaches a query language raw.
"""

from __future__ import annotations

import re

from fermix_memory.domain.query_words import STOPWORDS

MAX_TERMS = 32
MAX_TERM_CHARS = 64
_WORD = re.compile(r"\w+", re.UNICODE)


def query_terms(text: str) -> list[str]:
    """Distinct word tokens of ``text``, in order, at most :data:`MAX_TERMS`."""
    if not isinstance(text, str):
        return []
    seen: dict[str, None] = {}
    if "_" not in text:  # no word joined by underscores (most text): each word as it is
        for word in _WORD.findall(text, 0, 20_000):
            seen.setdefault(word[:MAX_TERM_CHARS].lower(), None)
            if len(seen) >= MAX_TERMS:
                break
        return _meaningful(list(seen))
    for match in _WORD.finditer(text, 0, 20_000):
        word = match.group()
        if "_" in word:  # a word joined by underscores is its parts
            for part in word.replace("_", " ").split():
                seen.setdefault(part[:MAX_TERM_CHARS].lower(), None)
        else:
            seen.setdefault(word[:MAX_TERM_CHARS].lower(), None)
        if len(seen) >= MAX_TERMS:
            break
    return _meaningful(list(seen)[:MAX_TERMS])


def _meaningful(terms: list[str]) -> list[str]:
    """``terms`` without their stop words, unless nothing else is left."""
    meaningful = [t for t in terms if t not in STOPWORDS]
    return meaningful or terms
