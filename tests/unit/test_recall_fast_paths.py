"""Recall's fast paths give what the general paths give (issue 35).

``query_terms`` reads a text without any underscore word by word; ``read_dates`` returns a
text that names no day as it is. Each is checked against the general reading, over many texts.
"""

from __future__ import annotations

import random
import re
from datetime import UTC, datetime

from hypothesis import given, settings
from hypothesis import strategies as st

from fermix_memory.adapters.sql.search_terms import MAX_TERM_CHARS, MAX_TERMS, query_terms
from fermix_memory.domain.query_words import STOPWORDS
from fermix_memory.domain.time_expressions import DateReading, read_dates

_WORD = re.compile(r"\w+", re.UNICODE)
ANCHOR = datetime(2024, 5, 15, 12, tzinfo=UTC)
WORDS = ["the", "a", "what", "did", "we", "say", "about", "Café", "ÉCOLE", "straße", "İstanbul", "x" * 80,
         "snake_case", "__", "_a_", "on", "Monday", "3", "May", "2024", "last", "week", "yesterday",
         "ago", "days", "next", "tuesday", "15/01/2024", "early", "since", "?", "!", ",", "weekend",
         "plans", "dinner", "µ", "ﬁle", "٣", "日本語", "tonight", "morning", "in", "of", "to"]


def general_terms(text: str) -> list[str]:
    """The general reading: every word, one joined by underscores split into its parts."""
    seen: dict[str, None] = {}
    for match in _WORD.finditer(text, 0, 20_000):
        word = match.group()
        parts = word.replace("_", " ").split() if "_" in word else [word]
        for part in parts:
            seen.setdefault(part[:MAX_TERM_CHARS].lower(), None)
        if len(seen) >= MAX_TERMS:
            break
    terms = list(seen)[:MAX_TERMS]
    return [t for t in terms if t not in STOPWORDS] or terms


def texts(count: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 50))) for _ in range(count)]


def test_query_terms_match_the_general_reading_on_many_texts() -> None:
    for text in texts(3000, 35):
        assert query_terms(text) == general_terms(text), text


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300))
def test_query_terms_match_the_general_reading_on_any_text(text: str) -> None:
    assert query_terms(text) == general_terms(text)


def test_query_terms_stop_at_the_most_terms_with_or_without_underscores() -> None:
    many = " ".join(f"word{i}" for i in range(100))
    assert query_terms(many) == [f"word{i}" for i in range(MAX_TERMS)]
    assert query_terms(many + " a_b") == general_terms(many + " a_b")
    assert query_terms("the of to") == ["the", "of", "to"]


def test_a_text_naming_no_day_is_read_as_itself() -> None:
    seen_dates = seen_none = 0
    for text in texts(3000, 36):
        reading = read_dates(text, ANCHOR)
        if reading.windows:
            seen_dates += 1
            continue
        seen_none += 1
        assert reading == DateReading(windows=(), rest=text, relative=False), text
    assert seen_dates > 100 and seen_none > 100  # both paths were taken


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=200))
def test_any_text_naming_no_day_is_read_as_itself(text: str) -> None:
    reading = read_dates(text, ANCHOR)
    if not reading.windows:
        assert reading == DateReading(windows=(), rest=text, relative=False)
