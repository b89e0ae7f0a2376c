"""Ranking history hits with the searched scope's own statistics (ADR-0019).

FTS5's ``bm25`` measures word rarity over the whole table, so one owner's words would change
another owner's order. Instead every match inside the scope (at most :data:`MAX_CANDIDATES`,
the newest) is read with :data:`HITS_FUNCTION`, which reports per row how often each query
term occurs in the text and in the sender, and the row length; BM25 is then computed here
with the document count and document frequencies of the scope alone.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import apsw
import attrs

HITS_FUNCTION = "fermix_hits"
MAX_CANDIDATES = 2_000
# Columns of ``messages_fts``.
CONTENT, SENDER = 0, 1
# The sender counts a fraction of a word of the text: it tells apart turns that match the
# same words ("what does Kwame like" prefers Kwame's own turns) but never outweighs a word.
SENDER_WEIGHT = 0.3
K1, B = 1.2, 0.75


def _hits(api: apsw.FTS5ExtensionApi, *_: apsw.SQLiteValue) -> str:
    """``"<text length> <tf text>,<tf sender> ..."`` for phrases 1.. (phrase 0 is the scope token)."""
    parts = [str(api.column_size(CONTENT))]
    for phrase in range(1, api.phrase_count):
        located = api.phrase_locations(phrase)
        parts.append(f"{len(located[CONTENT])},{len(located[SENDER])}")
    return " ".join(parts)


def register(conn: apsw.Connection) -> None:
    """Make :data:`HITS_FUNCTION` available on ``conn``."""
    conn.register_fts5_function(HITS_FUNCTION, _hits)


@attrs.frozen
class Candidate:
    rowid: int
    length: int
    # (occurrences in the text, occurrences in the sender) per query term
    counts: tuple[tuple[int, int], ...]


def parse_candidate(rowid: int, hits: str) -> Candidate:
    length, *pairs = hits.split(" ")
    counts = tuple((int(c), int(s)) for c, s in (p.split(",") for p in pairs))
    return Candidate(rowid=rowid, length=int(length), counts=counts)


def rank(candidates: Sequence[Candidate], scope_size: int) -> list[tuple[int, float]]:
    """``(rowid, score)`` best first (ties: newest first); depends only on the scope's rows."""
    if not candidates:
        return []
    terms = len(candidates[0].counts)
    docs = max(scope_size, len(candidates))
    avg_length = max(1.0, sum(c.length for c in candidates) / len(candidates))
    idf = []
    for t in range(terms):
        df = sum(1 for c in candidates if c.counts[t][0] or c.counts[t][1])
        idf.append(math.log(1.0 + (docs - df + 0.5) / (df + 0.5)))
    scored = []
    for c in candidates:
        norm = K1 * (1.0 - B + B * c.length / avg_length)
        score = 0.0
        for t, (in_text, in_sender) in enumerate(c.counts):
            tf = in_text + SENDER_WEIGHT * in_sender
            if tf:
                score += idf[t] * tf * (K1 + 1.0) / (tf + norm)
        scored.append((c.rowid, score))
    scored.sort(key=lambda pair: (-pair[1], -pair[0]))
    return scored
