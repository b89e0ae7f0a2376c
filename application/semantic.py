"""Use case: recall by meaning (ADR-0043): the query's vector against the vectors of the
searched scope (recall fuses those hits with keyword recall's: application/fusion.py).

Vectors are a projection filled in the background (``vector_upkeep``); a text still waiting for
its vector is found by keyword recall only until its vector is stored. Only vectors labelled with
the current embedder are searched: two models' vectors are never compared.

A query's vector depends on the model and the query's text alone, so the vectors of recent
queries are kept (:class:`QueryVectors`, ADR-0061): a query asked again, by any path that
searches by meaning through the same :class:`SemanticSearch` (recall, the agent's tools), costs
no embedding. Nothing a write does changes them, so no write invalidates them.

A new query's vector is computed on a thread of its own while recall searches by words
(:meth:`SemanticSearch.embed_query_soon`, ADR-0071): the model's runtime leaves Python's lock
while it runs, and the vector depends on the text alone, so what recall returns is the same.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Protocol, runtime_checkable

from fermix_memory.application.embedder import Embedder, label_of
from fermix_memory.application.fusion import H
from fermix_memory.application.query_ports import MemoryHit, MessageHit, VectorIndex
from fermix_memory.domain.scopes import HistoryFilter, MemoryFilter

QUERY_VECTORS = 1024  # about 1.6 kB each for a 384-number model: under 2 MB when full


@runtime_checkable
class QueryEmbedder(Protocol):
    """An embedder with a way of its own for a search's query (on the turn's path), giving the
    vector :meth:`Embedder.embed` gives, to rounding (ADR-0086)."""

    def embed_query(self, text: str) -> bytes: ...


def embed_query(embedder: Embedder, text: str) -> bytes:
    """``text``'s vector as a query: by the embedder's way for queries where it has one."""
    if isinstance(embedder, QueryEmbedder):
        return embedder.embed_query(text)
    return embedder.embed([text])[0]


class QueryVectors:
    """The vectors of the ``size`` most recently used queries, each under its embedder's label
    and its exact text (as a 128-bit digest, so a long query takes no more room than a short
    one): a vector is never given for another model's label. Safe to share between threads."""

    def __init__(self, size: int = QUERY_VECTORS) -> None:
        if size < 1:
            raise ValueError(f"a cache of query vectors holds at least one, not {size}")
        self.size = size
        self._lock = threading.Lock()
        self._vectors: OrderedDict[tuple[str, bytes], bytes] = OrderedDict()

    def __len__(self) -> int:
        return len(self._vectors)

    @staticmethod
    def _key(label: str, text: str) -> tuple[str, bytes]:
        return label, hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()

    def get(self, label: str, text: str) -> bytes | None:
        key = self._key(label, text)
        with self._lock:
            vector = self._vectors.get(key)
            if vector is not None:
                self._vectors.move_to_end(key)
            return vector

    def put(self, label: str, text: str, vector: bytes) -> None:
        key = self._key(label, text)
        with self._lock:
            self._vectors[key] = vector
            self._vectors.move_to_end(key)
            while len(self._vectors) > self.size:
                self._vectors.popitem(last=False)


class _Pending:
    """``work`` run on a thread of its own; :meth:`result` waits for it."""

    def __init__(self, work: Callable[[], bytes | None]) -> None:
        self._work = work
        self._vector: bytes | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="fermix-query-vector")
        self._thread.start()

    def _run(self) -> None:
        try:
            self._vector = self._work()
        except BaseException as exc:  # raised again in the caller's thread, by result()
            self._error = exc

    def result(self) -> bytes | None:
        self._thread.join()
        if self._error is not None:
            raise self._error
        return self._vector


class SemanticSearch:
    """Searches ``index`` with ``embedder``'s vectors; a hit less similar to the query than
    ``floor`` (cosine) is no hit: every text is *somewhat* close to every query, and without a
    floor a search by meaning would return the whole scope, unrelated rows first when nothing
    relates (ADR-0054). The vectors of recent queries are kept in ``queries`` (its own cache
    unless one is given)."""

    def __init__(self, index: VectorIndex, embedder: Embedder, *, floor: float = -1.0,
                 queries: QueryVectors | None = None) -> None:
        self._index, self._embedder = index, embedder
        self.label = label_of(embedder)
        self.floor = floor
        self.queries = QueryVectors() if queries is None else queries

    def embed_query(self, query: str) -> bytes | None:
        """The query's vector; ``None`` for a query with nothing to mean (blank). A query whose
        vector is kept costs no embedding."""
        if not query.strip():
            return None
        label = label_of(self._embedder)
        vector = self.queries.get(label, query)
        if vector is None:  # two threads asking the same new query may both embed it: same vector
            vector = embed_query(self._embedder, query)
            self.queries.put(label, query, vector)
        return vector

    def embed_query_soon(self, query: str) -> Callable[[], bytes | None]:
        """A call that returns :meth:`embed_query`'s vector. A kept vector or a blank query is
        there at once; a new query is embedded on a thread of its own, started here, so the
        caller can search by words meanwhile; the call waits for it and raises what embedding
        raised. A call never made leaves the vector kept all the same."""
        if not query.strip():
            return lambda: None
        kept = self.queries.get(label_of(self._embedder), query)
        if kept is not None:
            return lambda: kept
        pending = _Pending(lambda: self.embed_query(query))
        return pending.result

    def waiting(self) -> int:
        """How many texts still wait for their vector (a search by meaning does not see them)."""
        return self._index.waiting()

    def memories(self, vector: bytes, where: MemoryFilter, limit: int) -> list[MemoryHit]:
        return self._above_floor(self._index.search_memories_by_vector(vector, self.label, where, limit))

    def history(self, vector: bytes, where: HistoryFilter, limit: int) -> list[MessageHit]:
        return self._above_floor(self._index.search_history_by_vector(vector, self.label, where, limit))

    def _above_floor(self, hits: list[H]) -> list[H]:
        return [hit for hit in hits if hit.similarity is None or hit.similarity >= self.floor]

