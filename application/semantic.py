"""Use case: recall by meaning (ADR-0043): the query's vector against the vectors of the
searched scope (recall fuses those hits with keyword recall's: application/fusion.py).

Vectors are a projection filled in the background (``vector_upkeep``); a text still waiting for
its vector is found by keyword recall only until its vector is stored. Only vectors labelled with
the current embedder are searched: two models' vectors are never compared.
"""

from __future__ import annotations

from fermix_memory.application.embedder import Embedder, label_of
from fermix_memory.application.fusion import H
from fermix_memory.application.query_ports import MemoryHit, MessageHit, VectorIndex
from fermix_memory.domain.scopes import HistoryFilter, MemoryFilter


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

