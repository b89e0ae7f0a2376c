"""Use case: recall by meaning (ADR-0043): the query's vector against the vectors of the
searched scope, and the fusion of those hits with keyword recall's.

Vectors are a projection filled in the background (``vector_upkeep``); a text still waiting for
its vector is found by keyword recall only until its vector is stored. Only vectors labelled with
the current embedder are searched: two models' vectors are never compared.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import TypeVar

import attrs

from fermix_memory.application.embedder import Embedder, label_of
from fermix_memory.application.ports import MemoryHit, MessageHit, VectorIndex
from fermix_memory.domain.scopes import HistoryFilter, MemoryFilter

H = TypeVar("H", MemoryHit, MessageHit)

# Reciprocal rank fusion: 1 / (FUSION_K + rank) from each list (the usual 60): lists whose scores
# are not comparable (different statistics, or words against meaning) are compared by rank.
FUSION_K = 60
SEMANTIC_WEIGHT = 1.0


def ranks(hits: Sequence[MemoryHit | MessageHit]) -> list[int]:
    """Each hit's rank in its list, from 1; a turn brought as the reply to a matching question
    (``context_of``) shares that question's rank."""
    out: list[int] = []
    position = 0
    for hit in hits:
        if not (isinstance(hit, MessageHit) and hit.context_of is not None):
            position += 1
        out.append(position)
    return out


class SemanticSearch:
    """Searches ``index`` with ``embedder``'s vectors; a hit less similar to the query than
    ``floor`` (cosine) is no hit: every text is *somewhat* close to every query, and without a
    floor a search by meaning would return the whole scope, unrelated rows first when nothing
    relates (ADR-0054)."""

    def __init__(self, index: VectorIndex, embedder: Embedder, *, floor: float = -1.0) -> None:
        self._index, self._embedder = index, embedder
        self.label = label_of(embedder)
        self.floor = floor

    def embed_query(self, query: str) -> bytes | None:
        """The query's vector; ``None`` for a query with nothing to mean (blank)."""
        return self._embedder.embed([query])[0] if query.strip() else None

    def waiting(self) -> int:
        """How many texts still wait for their vector (a search by meaning does not see them)."""
        return self._index.waiting()

    def memories(self, vector: bytes, where: MemoryFilter, limit: int) -> list[MemoryHit]:
        return self._above_floor(self._index.search_memories_by_vector(vector, self.label, where, limit))

    def history(self, vector: bytes, where: HistoryFilter, limit: int) -> list[MessageHit]:
        return self._above_floor(self._index.search_history_by_vector(vector, self.label, where, limit))

    def _above_floor(self, hits: list[H]) -> list[H]:
        return [hit for hit in hits if hit.similarity is None or hit.similarity >= self.floor]


def fuse_kind(keyword: list[H], semantic: list[H], limit: int, identity: Callable[[H], Hashable],
              weight: float = SEMANTIC_WEIGHT) -> list[H]:
    """One kind's keyword and vector hits as one list, by reciprocal rank (``weight`` on the
    vector list's share); a hit in both lists counts twice and is kept as keyword recall found it
    (its snippet, the question it answers), with its similarity. A keyword hit brought as the
    reply to a matching question shares that question's rank. Ties keep keyword order, then
    vector order."""
    scores: dict[Hashable, float] = {}
    hits: dict[Hashable, H] = {}  # in first-seen order: keyword hits, then the vector list's others
    for hit, rank in zip(keyword, ranks(keyword), strict=True):
        key = identity(hit)
        hits.setdefault(key, hit)
        scores[key] = 1.0 / (FUSION_K + rank)
    for rank, hit in enumerate(semantic, 1):
        key = identity(hit)
        found = hits.setdefault(key, hit)
        if found is not hit:  # found by words too: kept as keyword recall found it, with its similarity
            hits[key] = attrs.evolve(found, similarity=hit.similarity)
        scores[key] = scores.get(key, 0.0) + weight / (FUSION_K + rank)
    order = {key: i for i, key in enumerate(hits)}
    best = sorted(hits, key=lambda key: (-scores[key], order[key]))
    return [hits[key] for key in best[:limit]]
