"""Vectors as a projection (the ``VectorIndex`` port, ADR-0043).

``vector_queue`` lists the messages and memory rows whose text has no vector yet: the schema's
triggers queue a memory row in the write that changes it, and :meth:`queue_new` the messages
and new rows written since the last call (on SQLite; PostgreSQL's triggers queue them too), and the triggers
drop a vector with its text. The
background upkeep reads a batch of queued texts here, embeds them off the store's writer, and
stores the vectors in a short write that checks each text is still the one embedded (a text
changed in between stays queued). Search is a brute-force dot product over the vectors of the
searched scope, filtered as keyword recall filters it; a scope's vectors are kept between
searches (``vector_cache``) while the schema's change count allows.

The SQL is plain enough for every dialect; each dialect's ``vectors`` module subclasses
:class:`SqlVectorIndex` with what differs: how new messages are queued (SQLite above a mark,
PostgreSQL by its schema's triggers), what waits, and how a top-up reads the newer vectors.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from contextlib import nullcontext
from typing import Any, Protocol, TypeVar

from fermix_memory.adapters.sql.history import visible
from fermix_memory.adapters.sql.read_side import Reading, ReadSide, clamp_limit
from fermix_memory.adapters.sql.rows import MESSAGE_FIELDS, memory_columns, memory_from_row, message_from_row
from fermix_memory.adapters.sql.scope_sql import scope_sql
from fermix_memory.adapters.sql.transaction import SqlTransaction
from fermix_memory.adapters.sql.vector_cache import ScopeVectorCache, ScopeVectors
from fermix_memory.application.embedder import similarity
from fermix_memory.application.log_position import erases
from fermix_memory.application.query_ports import MemoryHit, MessageHit, QueuedText
from fermix_memory.application.store_ports import RecordedEvent
from fermix_memory.domain.scopes import HistoryFilter, MemoryFilter

T = TypeVar("T")


class VectorStore(Protocol):
    """What the index needs of a store: its read connection, its writer, its commit hooks."""

    def reader(self) -> Any: ...

    def write(self, work: Callable[[Any], T], /) -> T: ...

    def add_after_commit(self, hook: Callable[[list[RecordedEvent]], None], /) -> None: ...


_TABLE = {"message": "messages", "memory": "memories"}
# The text each kind is embedded from (the schemas' triggers queue a row again when it changes).
VECTOR_TEXT = {"message": "m.sender || ': ' || m.content", "memory": "replace(m.key, '_', ' ') || ': ' || m.value"}
# A vector search ranks this many times the hits asked for before reading whole rows; only if
# hidden rows (checkpoints holding other owners' words) leave too few does it rank them all.
_HEADROOM = 4
# Up to this many vectors a search sorts them all rather than first pick the closest: fewer numpy
# calls, the same hits (the picked are the sorted order's first anyway).
_SORT_ALL_UP_TO = 512
# Vectors per matrix-vector product: below where numpy's BLAS library splits one across threads.
_ROWS_AT_ONCE = 256
SCOPE_VECTORS = "SELECT v.vector, m.id FROM message_vectors v JOIN messages m ON m.id = v.message_id"
# Whole rows / messages by id, the ids' marks after (one statement each per count of ids).
_ROWS_BY_ID = f"SELECT {memory_columns('m')} FROM memories m WHERE m.id IN "
_TURNS_BY_ID = f"SELECT {', '.join('m.' + c for c in MESSAGE_FIELDS)} FROM messages m WHERE m.id IN "
_CHANGES = "SELECT changes, memory_changes FROM vector_changes WHERE id = 1"
# The rows of a memory scope that a search by meaning ranks (their vectors, and ids).
_SCOPE_ROWS = ("SELECT v.vector, m.id FROM memory_vectors v JOIN memories m ON m.id = v.memory_id"
               " WHERE v.label = ? AND {scope} AND m.archived_at IS NULL")
# What is kept of memory scopes' vectors: rows are few beside messages.
_ROWS_KEPT_BYTES = 16 * 2**20
_SCOPE_OF_MESSAGES = ("m.agent_id = ? AND m.owner_id = ?", "m.channel = ? AND m.chat_id = ? AND m.thread_scope = ?")
# Vectors that point at nothing, and queue entries that do: what ``verify`` fails on.
ORPHAN_VECTORS_SQL = (
    "SELECT (SELECT count(*) FROM message_vectors v WHERE NOT EXISTS"
    "   (SELECT 1 FROM messages m WHERE m.id = v.message_id))"
    " + (SELECT count(*) FROM memory_vectors v WHERE NOT EXISTS (SELECT 1 FROM memories m WHERE m.id = v.memory_id))"
    " + (SELECT count(*) FROM vector_queue q WHERE (q.kind = 'message' AND NOT EXISTS"
    "   (SELECT 1 FROM messages m WHERE m.id = q.id)) OR (q.kind = 'memory' AND NOT EXISTS"
    "   (SELECT 1 FROM memories m WHERE m.id = q.id)) OR q.kind NOT IN ('message', 'memory'))"
)
WAITING_SQL = "SELECT count(*) FROM vector_queue"


def unvectored_sql(messages_queued_up_to: str = "", *, memories_queued_up_to: str = "") -> str:
    """How many messages and rows have no vector (of any label) and wait for none: what ``verify``
    fails on. ``messages_queued_up_to`` / ``memories_queued_up_to``: the SQL of the last message /
    row id queued so far, when those above it are not queued yet and wait too (SQLite)."""
    up_to = {"message": messages_queued_up_to, "memory": memories_queued_up_to}
    return " + ".join(
        f"(SELECT count(*) FROM {table} m WHERE {f'm.id <= {up_to[kind]} AND ' if up_to[kind] else ''}"
        f"NOT EXISTS (SELECT 1 FROM {kind}_vectors v WHERE v.{kind}_id = m.id)"
        f" AND NOT EXISTS (SELECT 1 FROM vector_queue q WHERE q.kind = '{kind}' AND q.id = m.id))"
        for kind, table in (("message", "messages"), ("memory", "memories")))


class SqlVectorIndex(ReadSide):
    """``VectorIndex`` on one store: reads on this thread's read connection, writes through the
    store's writer. A dialect's subclass says how new messages are queued (:meth:`queue_new`),
    what waits (``WAITING``) and how a top-up reads the newer vectors of a scope (``NEWER``)."""

    # What waits for a vector (here: the queue, which the schema's triggers fill).
    WAITING = WAITING_SQL
    # A scope's vectors above an id, then their messages.
    NEWER = SCOPE_VECTORS

    def __init__(self, store: VectorStore, *, reading: Reading | None = None) -> None:
        super().__init__(store.reader, reading or nullcontext)
        self._store = store
        # Both schemas count the changes a kept scope's vectors could miss (SQLite's 9, PostgreSQL's 5).
        self._kept = ScopeVectorCache()
        # Memory scopes' vectors, under the schemas' count of memory vectors' changes (SQLite's 16,
        # PostgreSQL's 11): any change of a row's vector, or a row archived or moved, empties it.
        self._kept_rows = ScopeVectorCache(_ROWS_KEPT_BYTES)
        self._listening = False  # to commits, from the first scope kept: appends pay nothing before

    def _forget_kept_on_erasure(self, recorded: list[RecordedEvent]) -> None:
        if erases(recorded):
            self._kept.clear()
            self._kept_rows.clear()

    def queue_new(self) -> int:
        """Queue the messages written since the last call; none here: the schema's triggers queue
        each message as it is written."""
        return 0

    def queued(self, limit: int) -> list[QueuedText]:
        items: list[QueuedText] = []
        for kind, table in _TABLE.items():
            rows = self._rows(f"SELECT q.id, {VECTOR_TEXT[kind]} FROM vector_queue q JOIN {table} m ON m.id = q.id"
                              " WHERE q.kind = ? ORDER BY q.id LIMIT ?", (kind, limit - len(items)))
            items += [QueuedText(kind, int(r[0]), str(r[1])) for r in rows]
            if len(items) >= limit:
                break
        return items

    def store_vectors(self, label: str, items: Sequence[QueuedText], vectors: Sequence[bytes]) -> int:
        def work(tx: SqlTransaction) -> int:
            stored = 0
            for item, vector in zip(items, vectors, strict=True):
                text = tx.cursor.execute(f"SELECT {VECTOR_TEXT[item.kind]} FROM {_TABLE[item.kind]} m WHERE m.id = ?",
                                         (item.id,)).fetchall()
                if not text or text[0][0] != item.text:
                    continue  # gone (its queue entry went with it), or changed (queued again)
                tx.cursor.execute(f"INSERT INTO {item.kind}_vectors VALUES (?, ?, ?) ON CONFLICT({item.kind}_id)"
                                  " DO UPDATE SET label = excluded.label, vector = excluded.vector",
                                  (item.id, label, vector))
                tx.cursor.execute("DELETE FROM vector_queue WHERE kind = ? AND id = ?", (item.kind, item.id))
                stored += 1
            return stored
        return self._store.write(work)

    def queue_other_labels(self, label: str) -> int:
        def work(tx: SqlTransaction) -> int:
            before = waiting_in(tx.cursor)
            for kind in _TABLE:
                tx.cursor.execute(f"INSERT INTO vector_queue(kind, id) SELECT '{kind}', {kind}_id"
                                  f" FROM {kind}_vectors WHERE label <> ? ON CONFLICT DO NOTHING", (label,))
            return waiting_in(tx.cursor) - before
        return self._store.write(work)

    def waiting(self) -> int:
        return int(self._rows(self.WAITING)[0][0])

    def search_memories_by_vector(self, vector: bytes, label: str, where: MemoryFilter,
                                  limit: int) -> list[MemoryHit]:
        n = clamp_limit(limit)
        return self._best_rows(vector, where, self._row_vectors(label, where), n) if n else []

    def search_history_by_vector(self, vector: bytes, label: str, where: HistoryFilter,
                                 limit: int) -> list[MessageHit]:
        n = clamp_limit(limit)
        return self._best_turns(vector, where, self._turn_vectors(label, where), n) if n else []

    def search_by_vector_soon(self, label: str, memories: MemoryFilter | None, history: HistoryFilter | None,
                              limit: int) -> Callable[[bytes], tuple[list[MemoryHit], list[MessageHit]]]:
        """The two searches above, each scope's vectors (kept, checked, topped up) read now and
        ranked when the vector comes (ADR-0086)."""
        n = clamp_limit(limit)
        rows = self._row_vectors(label, memories) if memories is not None and n else None
        turns = self._turn_vectors(label, history) if history is not None and n else None

        def search(vector: bytes) -> tuple[list[MemoryHit], list[MessageHit]]:
            return ([] if rows is None or memories is None else self._best_rows(vector, memories, rows, n),
                    [] if turns is None or history is None else self._best_turns(vector, history, turns, n))
        return search

    def _best_rows(self, vector: bytes, where: MemoryFilter, scope: tuple[Any, Any, Sequence[bytes]],
                   n: int) -> list[MemoryHit]:
        ids, matrix, vectors = scope
        best = _best(vector, ids, n, vectors=vectors, matrix=matrix)
        if not best:
            return []
        # Whole rows for the best only, by id (the filter checked again here, not in SQL, where it
        # would lead the planner to the scope's index): one archived meanwhile drops out.
        read = {row.id: row for row in map(memory_from_row, self._rows(
            f"{_ROWS_BY_ID}({', '.join('?' * len(best))})"
            " AND m.archived_at IS NULL", [i for i, _ in best])) if where.admits(row)}
        return [MemoryHit(memory=row, rank=-score, snippet=row.value, similarity=score)
                for i, score in best if (row := read.get(i)) is not None]

    def _turn_vectors(self, label: str, where: HistoryFilter) -> tuple[Any, Any, Sequence[bytes]]:
        """(ids, matrix or None, vectors) of the messages ``where`` selects (ids and vectors only)."""
        sql, params = _SCOPE_OF_MESSAGES[0], [where.agent_id, where.owner_id]
        if where.conversation is not None:
            c = where.conversation
            sql += " AND " + _SCOPE_OF_MESSAGES[1]
            params += [c.channel, c.chat_id, c.thread_scope]
        return self._message_vectors((label, where.agent_id, where.owner_id, where.conversation),
                                     sql, [label, *params])

    def _best_turns(self, vector: bytes, where: HistoryFilter, scope: tuple[Any, Any, Sequence[bytes]],
                    n: int) -> list[MessageHit]:
        ids, matrix, vectors = scope
        hits: list[MessageHit] = []
        done = 0
        for wanted in (_HEADROOM * n, len(ids)):  # rarely, hidden rows leave too few: then all
            ranked = _best(vector, ids, wanted, vectors=vectors, matrix=matrix)
            for start in range(done, len(ranked), 2 * n):
                part = ranked[start:start + 2 * n]
                done = start + len(part)
                marks = ", ".join("?" * len(part))
                # Read in one statement; made into messages in rank order, only until ``n`` are found.
                read = {int(r[0]): r for r in self._rows(
                    f"{_TURNS_BY_ID}({marks})",
                    [i for i, _ in part])}
                for i, score in part:
                    row = read.get(i)
                    if row is not None and visible(message := message_from_row(row), where):
                        hits.append(MessageHit(message=message, rank=-score, snippet=message.content,
                                                similarity=score))
                        if len(hits) == n:
                            return hits
            if done >= len(ids):
                break
        return hits

    def _row_vectors(self, label: str, where: MemoryFilter) -> tuple[Any, Any, Sequence[bytes]]:
        """(ids, matrix or None, vectors) of the scope's unarchived rows' vectors: kept from the last
        search while the schema's count of memory vectors' changes stays where it was."""
        sql, params = scope_sql(where, "m")
        np = _numpy()
        if np is None:
            rows = self._rows(_SCOPE_ROWS.format(scope=sql), [label, *params])
            return [int(r[1]) for r in rows], None, [r[0] for r in rows]
        changes = int(self._rows(_CHANGES)[0][1])
        kept = self._kept_rows.get((label, where), changes)
        if kept is None:
            kept = _scope_vectors(np, self._rows(_SCOPE_ROWS.format(scope=sql), [label, *params]))
            self._listen()
            self._kept_rows.put((label, where), changes, kept)
        return kept.ids, kept.matrix, ()

    def _listen(self) -> None:
        if not self._listening:
            self._listening = True
            self._store.add_after_commit(self._forget_kept_on_erasure)

    def _message_vectors(self, key: Hashable, scope: str, params: list[Any]) -> tuple[Any, Any, Sequence[bytes]]:
        """(ids, matrix or None, vectors) of the scope's message vectors: kept from the last search
        and topped up with the vectors above it when the schema's change count allows."""
        np = _numpy()
        if np is None:
            rows = self._rows(f"{SCOPE_VECTORS} WHERE v.label = ? AND {scope}", params)
            return [int(r[1]) for r in rows], None, [r[0] for r in rows]
        changes = int(self._rows(_CHANGES)[0][0])
        kept = self._kept.get(key, changes)
        if kept is None:
            kept = _scope_vectors(np, self._rows(f"{SCOPE_VECTORS} WHERE v.label = ? AND {scope}", params))
        else:  # from the vectors' own ids: only those above the last one kept are read
            newer = self._rows(f"{self.NEWER} WHERE v.message_id > ? AND v.label = ? AND {scope}",
                               [kept.last_id, *params])
            if newer:
                more = _scope_vectors(np, newer)
                kept = more if not len(kept.ids) else ScopeVectors(
                    np.concatenate([kept.ids, more.ids]), np.concatenate([kept.matrix, more.matrix]))
        self._listen()
        self._kept.put(key, changes, kept)
        return kept.ids, kept.matrix, ()


def _numpy() -> Any:
    """numpy when the ``[semantic]`` extra brought it, else ``None`` (imported at the first search)."""
    try:
        import numpy
    except ImportError:
        return None
    return numpy


def _scope_vectors(np: Any, rows: Sequence[Sequence[Any]]) -> ScopeVectors:
    ids = np.fromiter((int(r[1]) for r in rows), dtype=np.int64, count=len(rows))
    if not rows:
        return ScopeVectors(ids, np.empty((0, 0), dtype="<f4"))
    return ScopeVectors(ids, _matrix(np, [r[0] for r in rows]))


def _matrix(np: Any, vectors: Sequence[bytes]) -> Any:
    """The packed vectors as one float32 matrix, a row each."""
    return np.frombuffer(b"".join(vectors), dtype="<f4").reshape(len(vectors), -1)


def waiting_in(cursor: Any) -> int:
    return int(cursor.execute(WAITING_SQL).fetchall()[0][0])


def _best(query: bytes, ids: Sequence[int] | Any, n: int, *, vectors: Sequence[bytes] = (),
          matrix: Any = None) -> list[tuple[int, float]]:
    """(id, similarity) of the ``n`` vectors closest to ``query`` (``matrix``, one row per id, or
    else ``vectors``), best first; ties go to the greater id (the newer row). numpy when the
    ``[semantic]`` extra brought it, else plain Python."""
    if n <= 0 or not len(ids):
        return []
    np = _numpy()
    if np is None:
        scores = [similarity(query, v) for v in vectors]
        order = sorted(range(len(scores)), key=lambda i: (-scores[i], -ids[i]))
        return [(int(ids[i]), scores[i]) for i in order[:n]]
    if matrix is None:
        matrix = _matrix(np, vectors)
    similarities = _similarities(np, matrix, np.frombuffer(query, dtype="<f4"))
    count = len(similarities)
    if count <= _SORT_ALL_UP_TO or n >= count:  # all sorted: the same first n as the general path's
        keys, picked = similarities, np.asarray(ids)
    else:  # every vector at least as close as the n-th best: ties at the edge kept
        chosen = np.flatnonzero(similarities >= np.partition(similarities, count - n)[count - n])
        keys, picked = similarities[chosen], np.asarray(ids)[chosen]
    order = np.lexsort((-picked, -keys))[:n]  # by similarity, then id, both descending
    return list(zip(picked[order].tolist(), keys[order].tolist(), strict=True))


def _similarities(np: Any, matrix: Any, query: Any) -> Any:
    """``matrix @ query``, in products of at most ``_ROWS_AT_ONCE`` rows (the same numbers): the BLAS
    library numpy brings splits a larger product across threads, whose waking costs a search over
    2,000 vectors 5-40 ms on a loaded machine where one thread takes 0.2 ms, and whose spinning
    afterwards takes CPU from what the process does next (ADR-0086)."""
    out = np.empty(len(matrix), dtype=np.float32)
    for start in range(0, len(matrix), _ROWS_AT_ONCE):
        np.dot(matrix[start:start + _ROWS_AT_ONCE], query, out=out[start:start + _ROWS_AT_ONCE])
    return out
