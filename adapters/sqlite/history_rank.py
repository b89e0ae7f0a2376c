"""Ranking history hits with the searched scope's own statistics (ADR-0019).

FTS5's ``bm25`` measures word rarity over the whole table, so one owner's words would change
another owner's order. Instead the rarity (idf) of each query term is counted inside the scope
(its matches among the scope's rows), and :data:`SCORE_FUNCTION` scores every match inside the
scope (at most :data:`MAX_CANDIDATES`, the newest) with those weights.
"""

from __future__ import annotations

import math

import apsw

SCORE_FUNCTION = "fermix_scope_bm25"
MAX_CANDIDATES = 2_000
# Columns of ``messages_fts``.
CONTENT, SENDER = 0, 1
# The sender counts a fraction of a word of the text: it tells apart turns that match the
# same words ("what does Kwame like" prefers Kwame's own turns) but never outweighs a word.
SENDER_WEIGHT = 0.3
K1, B = 1.2, 0.75
# Length normalisation is against a fixed typical chat turn, not a corpus average: the score
# of a row then depends on the row and the scope's word rarities only.
REFERENCE_LENGTH = 16.0


def _score(api: apsw.FTS5ExtensionApi, *idf: apsw.SQLiteValue) -> float:
    """BM25 of this row with the given per-term ``idf`` (phrase 0, the scope token, is skipped);
    the text's length is normalised against :data:`REFERENCE_LENGTH`."""
    norm = K1 * (1.0 - B + B * api.column_size(CONTENT) / REFERENCE_LENGTH)
    score = 0.0
    for phrase in range(1, min(api.phrase_count, len(idf) + 1)):
        located = api.phrase_locations(phrase)
        tf = len(located[CONTENT]) + SENDER_WEIGHT * len(located[SENDER])
        if tf:
            score += float(idf[phrase - 1]) * tf * (K1 + 1.0) / (tf + norm)  # type: ignore[arg-type]
    return score


def register(conn: apsw.Connection) -> None:
    """Make :data:`SCORE_FUNCTION` available on ``conn``."""
    conn.register_fts5_function(SCORE_FUNCTION, _score)


def idf(doc_frequency: int, scope_size: int) -> float:
    """Rarity of a word inside the scope (BM25's, kept positive)."""
    docs = max(scope_size, doc_frequency)
    return math.log(1.0 + (docs - doc_frequency + 0.5) / (doc_frequency + 0.5))
