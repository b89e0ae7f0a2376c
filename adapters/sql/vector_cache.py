"""What a search by meaning keeps of a scope's vectors between searches (ADR-0043).

Reading a scope's vectors is most of a search: 10,000 vectors are 15 MB read row by row, where
the dot product over them takes about a millisecond. So each scope searched keeps its vectors
here as one matrix, and a later search reads only the vectors of messages above the last one
kept. That is right only while vectors come in order: the schema's ``vector_changes`` count
(migration 9) moves when a vector goes, changes, or comes in behind a later one, and a count
other than the one the matrices were built under empties the cache. An erasure committed by
this process empties it at once too, so no vector of erased text outlives its rows here.
Bounded by bytes, least recently searched first out.

Memory rows' scopes are kept the same way in a cache of their own, under the schema's count of
memory vectors' changes (ADR-0086; SQLite's schema 16, PostgreSQL's 11), which moves at any change
of a row's vector and whenever a row is archived, brought back or moved: rows are few, so a
change empties what is kept rather than topping it up.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Hashable
from typing import Any

MAX_BYTES = 64 * 2**20


class ScopeVectors:
    """One scope's vectors: ``ids`` (int64) and ``matrix`` (float32, one row per id)."""

    __slots__ = ("ids", "last_id", "matrix")

    def __init__(self, ids: Any, matrix: Any) -> None:
        self.ids, self.matrix = ids, matrix
        self.last_id = int(ids.max()) if len(ids) else 0

    @property
    def nbytes(self) -> int:
        return int(self.ids.nbytes + self.matrix.nbytes)


class ScopeVectorCache:
    """Scopes' vectors under one ``vector_changes`` count; thread-safe."""

    def __init__(self, max_bytes: int = MAX_BYTES) -> None:
        self._max_bytes = max_bytes
        self._lock = threading.Lock()
        self._scopes: OrderedDict[Hashable, ScopeVectors] = OrderedDict()
        self._bytes = 0
        self._changes: int | None = None

    def get(self, key: Hashable, changes: int) -> ScopeVectors | None:
        """The scope's vectors if kept under ``changes``; a new count empties the cache."""
        with self._lock:
            if changes != self._changes:
                self._empty()
                self._changes = changes
                return None
            scope = self._scopes.get(key)
            if scope is not None:
                self._scopes.move_to_end(key)
            return scope

    def put(self, key: Hashable, changes: int, scope: ScopeVectors) -> None:
        """Keep ``scope``, read under ``changes`` (dropped if the count moved meanwhile)."""
        with self._lock:
            if changes != self._changes:
                return
            old = self._scopes.pop(key, None)
            if old is not None:
                self._bytes -= old.nbytes
            if scope.nbytes > self._max_bytes:
                return
            self._scopes[key] = scope
            self._bytes += scope.nbytes
            while self._bytes > self._max_bytes:
                _, evicted = self._scopes.popitem(last=False)
                self._bytes -= evicted.nbytes

    def clear(self) -> None:
        with self._lock:
            self._empty()
            self._changes = None

    def _empty(self) -> None:
        self._scopes.clear()
        self._bytes = 0
