"""Ranking history hits with the searched scope's own statistics (ADR-0019).

FTS5's ``bm25`` measures word rarity over the whole table, so one owner's words would change
another owner's order. Instead the rarity (idf) of each query term is counted inside the scope
(its matches among the scope's rows), and :data:`SCORE_FUNCTION` scores every match inside the
scope (at most :data:`MAX_CANDIDATES`, the newest) with those weights.
"""

from __future__ import annotations

import math
from itertools import accumulate
from typing import cast

import apsw

SCORE_FUNCTION = "fermix_scope_bm25"
MAX_CANDIDATES = 2_000
# Columns of ``messages_fts``.
CONTENT, SENDER = 0, 1
# The sender counts a fraction of a word of the text: it tells apart turns that match the
# same words ("what does Kwame like" prefers Kwame's own turns) but never outweighs a word.
SENDER_WEIGHT = 0.3
K1, B = 1.2, 0.75
# Length normalisation is against the searched scope's own average turn (never a corpus-wide
# one: the score of a row then depends on the row and its scope only), but never below a typical
# short chat turn: against the real average of chats of 7-word turns, temporal R@1 fell 2.8 points
# on our eval, while chats of 35-word turns gained (ADR-0019). The scope's characters are kept
# with its size; a word token of chat text is this many characters, spaces and punctuation
# included (5.07-5.28 over the short turns of our eval, 4.90-4.93 over its long ones).
REFERENCE_LENGTH = 16.0
CHARS_PER_TOKEN = 5.1


def reference_length(messages: int, chars: int) -> float:
    """The length a turn of the scope is measured against: its average turn in word tokens (from
    its messages and their characters), at least :data:`REFERENCE_LENGTH`."""
    return max(REFERENCE_LENGTH, chars / max(1, messages) / CHARS_PER_TOKEN)


def _score(api: apsw.FTS5ExtensionApi, *args: apsw.SQLiteValue) -> float:
    """BM25 of this row; ``args`` are the scope's :func:`reference_length`, which the text's
    length is normalised against, then the per-term idf (phrase 0, the scope token, is skipped,
    as is any phrase given weight 0)."""
    reference, *idf = args
    norm = K1 * (1.0 - B + B * api.column_size(CONTENT) / float(cast(float, reference)))
    score = 0.0
    for phrase, weight in enumerate(idf[: api.phrase_count - 1], start=1):
        # Most of a query's words are not in a given row: ask for positions only when it is.
        if weight and api.phrase_columns(phrase):
            located = api.phrase_locations(phrase)
            tf = len(located[CONTENT]) + SENDER_WEIGHT * len(located[SENDER])
            score += float(weight) * tf * (K1 + 1.0) / (tf + norm)
    return score


def register(conn: apsw.Connection) -> None:
    """Make :data:`SCORE_FUNCTION` available on ``conn``."""
    conn.register_fts5_function(SCORE_FUNCTION, _score)


def idf(doc_frequency: int, scope_size: int) -> float:
    """Rarity of a word inside the scope (BM25's, kept positive)."""
    docs = max(scope_size, doc_frequency)
    return math.log(1.0 + (docs - doc_frequency + 0.5) / (doc_frequency + 0.5))


# The candidates are the matches of the scope's rarest query words, taken rarest first until
# their rows add up to this many per result asked for (then every word is scored on them).
CANDIDATES_PER_RESULT = 3
# A word in more than 1 / COMMON_FRACTION of the scope never selects candidates on its own.
COMMON_FRACTION = 2
# When the rarest words' rows are fewer than the limit, the list is filled from at most this many
# of the newest rows (per result asked for) holding only commoner words.
FILL_CANDIDATES_PER_RESULT = 2


def candidate_terms(doc_frequencies: list[int], scope_size: int, limit: int) -> list[int]:
    """Indexes of the terms whose matches are scored: the rarest in the scope, rarest first,
    until their in-scope row counts reach :data:`CANDIDATES_PER_RESULT` times ``limit``; rows
    holding only the other (commoner) words would rank below them. Depends on the scope's own
    counts only, so the candidates, like the scores, ignore every other scope."""
    chosen: list[int] = []
    rows = 0
    for i in sorted(range(len(doc_frequencies)), key=lambda i: (doc_frequencies[i], i)):
        if rows >= CANDIDATES_PER_RESULT * limit or doc_frequencies[i] > scope_size // COMMON_FRACTION:
            break
        chosen.append(i)
        rows += doc_frequencies[i]
    return sorted(chosen) or list(range(len(doc_frequencies)))


# ``messages_fts``'s tokenizer (schema migration 3), to stem query words and mark them in a hit.
TOKENIZER = ("porter", ["unicode61", "remove_diacritics", "2"])
SNIPPET_TOKENS = 16


def tokenizer(conn: apsw.Connection) -> apsw.FTS5Tokenizer:
    return conn.fts5_tokenizer(*TOKENIZER)


def stems(tokenize: apsw.FTS5Tokenizer, words: list[str]) -> frozenset[str]:
    """The index's form of each query word."""
    found: set[str] = set()
    for word in words:
        for token in tokenize(word.encode(), apsw.FTS5_TOKENIZE_QUERY, None, include_offsets=False,
                              include_colocated=False):
            found.add(str(token))
    return frozenset(found)


def snippet(tokenize: apsw.FTS5Tokenizer, text: str, wanted: frozenset[str]) -> str:
    """Like FTS5's ``snippet(…, '[', ']', '…', 16)``: the 16-token window holding the most query
    words, each marked ``[word]``, with ``…`` where text was cut."""
    data = text.encode()
    tokens = cast("list[tuple[int, int, str]]", tokenize(
        data, apsw.FTS5_TOKENIZE_DOCUMENT, None, include_offsets=True, include_colocated=False))
    hit = [token[2] in wanted for token in tokens]
    start = 0
    if len(tokens) > SNIPPET_TOKENS:
        before = [0, *accumulate(hit)]  # before[i]: matches among the first i tokens
        counts = [before[i + SNIPPET_TOKENS] - before[i] for i in range(len(tokens) - SNIPPET_TOKENS + 1)]
        start = counts.index(max(counts))
        # Some words before the first match, when that keeps every match of the window.
        lead = max(0, next((i for i in range(start, len(hit)) if hit[i]), start) - 3)
        if lead > start and counts[min(lead, len(counts) - 1)] == counts[start]:
            start = min(lead, len(counts) - 1)
    window = range(start, min(len(tokens), start + SNIPPET_TOKENS))
    if not window:
        return text
    begin = 0 if start == 0 else tokens[start][0]
    end = len(data) if window.stop == len(tokens) else tokens[window.stop - 1][1]
    out, at = [], begin
    for i in window:
        if hit[i]:
            s, e = tokens[i][0], tokens[i][1]
            out += [data[at:s].decode(errors="replace"), "[", data[s:e].decode(errors="replace"), "]"]
            at = e
    out.append(data[at:end].decode(errors="replace"))
    return ("…" if begin else "") + "".join(out) + ("…" if end < len(data) else "")
