"""Use case: recall by meaning (ADR-0043): the query's vector against the vectors of the
searched scope (recall fuses those hits with keyword recall's: application/fusion.py).

Vectors are a projection filled in the background (``vector_upkeep``); a text still waiting for
its vector is found by keyword recall only until its vector is stored. Only vectors labelled with
the current embedder are searched: two models' vectors are never compared.

A query's vector depends on the model and the query's text alone, so the vectors of recent
queries are kept (:class:`QueryVectors`, ADR-0061): a query asked again, by any path that
searches by meaning through the same :class:`SemanticSearch` (recall, the agent's tools), costs
no embedding. Nothing a write does changes them, so no write invalidates them.

A new query's vector is computed on another thread while recall searches by words
(:meth:`SemanticSearch.embed_query_soon`, ADR-0071): the model's runtime leaves Python's lock
while it runs, and the vector depends on the text alone, so what recall returns is the same. The
query is tokenised on the caller's thread and its pass handed to a thread kept waiting for it, so
the pass starts at once rather than after the words are searched (ADR-0086); the threads end when
the memory closes (:meth:`SemanticSearch.close`).
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol, runtime_checkable

from fermix_memory.application.embedder import Embedder, label_of
from fermix_memory.application.fusion import H
from fermix_memory.application.query_ports import MemoryHit, MessageHit, VectorIndex
from fermix_memory.domain.scopes import HistoryFilter, MemoryFilter

QUERY_VECTORS = 1024  # about 1.6 kB each for a 384-number model: under 2 MB when full
# Threads that run new queries' passes at once, at most: one per call a memory's lane runs at once.
QUERY_PASSES = 4
# How long a caller waits, at most, for the thread it handed a pass to to start it (ADR-0096): the
# thread needs Python's lock for a moment to begin, and a caller that goes on searching by words
# holds it, so on a busy machine the pass began only when the words were found.
PASS_START_WAIT_S = 0.002


@runtime_checkable
class QueryEmbedder(Protocol):
    """An embedder with a way of its own for a search's query (on the turn's path), giving the
    vector :meth:`Embedder.embed` gives, to rounding (ADR-0086)."""

    def embed_query(self, text: str) -> bytes: ...


@runtime_checkable
class QueryPreparer(Protocol):
    """An embedder that embeds a query in two steps: what holds Python's lock (tokenising) on the
    calling thread, then the returned call, the model's pass, which leaves it and can run on
    another thread (ADR-0086). The vector is :meth:`QueryEmbedder.embed_query`'s."""

    def prepare_query(self, text: str) -> Callable[[], bytes]: ...


def embed_query(embedder: Embedder, text: str) -> bytes:
    """``text``'s vector as a query: by the embedder's way for queries where it has one."""
    if isinstance(embedder, QueryEmbedder):
        return embedder.embed_query(text)
    return embedder.embed([text])[0]


def prepare_query(embedder: Embedder, text: str) -> Callable[[], bytes]:
    """A call that returns :func:`embed_query`'s vector, what the embedder can do at once done."""
    if isinstance(embedder, QueryPreparer):
        return embedder.prepare_query(text)
    return lambda: embed_query(embedder, text)


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


def _raises(error: Exception) -> Callable[[], bytes | None]:
    def fail() -> bytes | None:
        raise error
    return fail


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
        # The threads new queries' passes run on, started at the first (ADR-0086): handing a pass
        # to a waiting thread costs the caller ~0.05 ms where starting one cost 0.6-1.7 ms.
        self._lock = threading.Lock()
        self._passes: ThreadPoolExecutor | None = None
        self._closed = False

    def embed_query(self, query: str) -> bytes | None:
        """The query's vector; ``None`` for a query with nothing to mean (blank). A query whose
        vector is kept costs no embedding."""
        if not query.strip():
            return None
        label = label_of(self._embedder)
        vector = self.queries.get(label, query)
        if vector is None:  # two threads asking the same new query may both embed it: same vector
            vector = self._keep(label, query, embed_query(self._embedder, query))
        return vector

    def embed_query_soon(self, query: str) -> Callable[[], bytes | None]:
        """A call that returns :meth:`embed_query`'s vector. A kept vector or a blank query is
        there at once; a new query is tokenised here and its pass through the model handed to a
        thread kept waiting for it, so the caller can search by words meanwhile (the pass begins
        at once: the thread never waits for Python's lock on the caller's work first); the call
        waits for it and raises what embedding raised. A call never made leaves the vector kept
        all the same."""
        if not query.strip():
            return lambda: None
        label = label_of(self._embedder)
        kept = self.queries.get(label, query)
        if kept is not None:
            return lambda: kept
        try:
            run = prepare_query(self._embedder, query)
        except Exception as exc:  # raised where it would have been: when the vector is asked for
            return _raises(exc)
        with self._lock:
            if self._closed:  # no thread is started for a closed search: the caller runs the pass
                return lambda: self._keep(label, query, run())
            if self._passes is None:
                self._passes = ThreadPoolExecutor(QUERY_PASSES, thread_name_prefix="fermix-query-vector")
            started = threading.Event()
            pending = self._passes.submit(self._pass, started, label, query, run)
        started.wait(PASS_START_WAIT_S)  # the caller leaves Python's lock for the pass to take it
        return pending.result

    def _pass(self, started: threading.Event, label: str, query: str, run: Callable[[], bytes]) -> bytes:
        started.set()
        return self._keep(label, query, run())

    def close(self) -> None:
        """Stop the threads that run queries' passes, once the passes under way end (their vectors
        kept); a new query asked later is embedded on the caller's thread. A second call does
        nothing."""
        with self._lock:
            passes, self._passes, self._closed = self._passes, None, True
        if passes is not None:
            passes.shutdown(wait=True)

    def _keep(self, label: str, query: str, vector: bytes) -> bytes:
        self.queries.put(label, query, vector)
        return vector

    def waiting(self) -> int:
        """How many texts still wait for their vector (a search by meaning does not see them)."""
        return self._index.waiting()

    def memories(self, vector: bytes, where: MemoryFilter, limit: int) -> list[MemoryHit]:
        return self._above_floor(self._index.search_memories_by_vector(vector, self.label, where, limit))

    def history(self, vector: bytes, where: HistoryFilter, limit: int) -> list[MessageHit]:
        return self._above_floor(self._index.search_history_by_vector(vector, self.label, where, limit))

    def near_soon(self, memories: MemoryFilter | None, history: HistoryFilter | None,
                  limit: int) -> Callable[[bytes], tuple[list[MemoryHit], list[MessageHit]]]:
        """A call that gives, for a query's vector, :meth:`memories` (none for ``memories=None``) and
        :meth:`history` (none for ``history=None``): the scopes' vectors are read here, while the
        query's pass may still run, and the call only ranks them and reads the best (ADR-0086)."""
        search = self._index.search_by_vector_soon(self.label, memories, history, limit)

        def near(vector: bytes) -> tuple[list[MemoryHit], list[MessageHit]]:
            rows, turns = search(vector)
            return self._above_floor(rows), self._above_floor(turns)
        return near

    def _above_floor(self, hits: list[H]) -> list[H]:
        return [hit for hit in hits if hit.similarity is None or hit.similarity >= self.floor]

