"""Use case: recall memories and/or history for a reader, by key or full-text query (R-FTS)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Protocol

import attrs

from fermix_memory.application.commands import Recall
from fermix_memory.application.errors import SemanticRecallUnavailable
from fermix_memory.application.fusion import fuse, fuse_kind
from fermix_memory.application.query_ports import MemoryHit, MemoryQueries, MessageHit
from fermix_memory.application.recall_dates import MAX_DATED, dated_query, dated_turns
from fermix_memory.application.recall_hop import second_hop
from fermix_memory.domain.errors import InvalidIdentifier
from fermix_memory.domain.scopes import (
    HistoryFilter,
    MemoryFilter,
    RecallMode,
    RecallSource,
    history_filter,
    memory_filter,
)
from fermix_memory.domain.values import check_int, normalise_key

MAX_RECALL = 100
# The weight of the turns of the days a question names, and of the turns its best turns' names
# bring (the word and meaning lists weigh 1): chosen on the evaluation (ADR-0075, ADR-0077).
DATE_WEIGHT = 2.0
HOP_WEIGHT = 1.0
# The sources whose rows / whose turns a recall searches (made once, not at each call).
_WITH_MEMORIES = frozenset((RecallSource.MEMORIES, RecallSource.ALL))
_WITH_HISTORY = frozenset((RecallSource.HISTORY, RecallSource.ALL))


@attrs.frozen(kw_only=True)
class RecallResult:
    memories: list[MemoryHit] = attrs.field(factory=list)
    messages: list[MessageHit] = attrs.field(factory=list)
    # Both lists as one, best first (``source="all"``; otherwise the one list asked for).
    ranked: list[MemoryHit | MessageHit] = attrs.field(factory=list)
    # A search by meaning: how many texts (messages and rows, in the whole store) still wait for
    # their vector, so unseen by it; ``None`` when nothing was searched by meaning.
    vectors_waiting: int | None = None


class MeaningSearch(Protocol):
    """What recall asks of a search by meaning (application/semantic.py, ADR-0043)."""

    def embed_query(self, query: str) -> bytes | None: ...

    def embed_query_soon(self, query: str) -> Callable[[], bytes | None]: ...

    def waiting(self) -> int: ...

    def memories(self, vector: bytes, where: MemoryFilter, limit: int) -> list[MemoryHit]: ...

    def history(self, vector: bytes, where: HistoryFilter, limit: int) -> list[MessageHit]: ...

    def near_soon(self, memories: MemoryFilter | None, history: HistoryFilter | None,
                  limit: int) -> Callable[[bytes], tuple[list[MemoryHit], list[MessageHit]]]: ...


def recall(queries: MemoryQueries, cmd: Recall, semantic: MeaningSearch | None = None,
           now: datetime | None = None) -> RecallResult:
    """Rows and messages ``cmd``'s reader may see that match its ``key`` exactly, or its ``query``
    by words (``mode="keyword"``), by meaning (``"semantic"``, with ``semantic``'s vectors) or
    both fused per kind (``"hybrid"``). ``mode=None``: hybrid when there is an embedder, else
    keyword. History is also searched by the days the query names (relative ones counted from
    ``cmd.as_of``, else from the newest turn searched, else ``now``) and by the names its best
    turns speak of (ADR-0075, ADR-0077).

    A job run only ever gets its own job rows (never history), whatever it asks.
    """
    limit = min(check_int(cmd.limit, "limit", minimum=0), MAX_RECALL)
    mode, query, key, source = cmd.mode, cmd.query, cmd.key, cmd.source
    if mode is None:
        mode = RecallMode.KEYWORD if semantic is None else RecallMode.HYBRID
    keyword = mode is RecallMode.KEYWORD
    if not keyword and semantic is None:
        raise SemanticRecallUnavailable(
            f"recall mode {mode.value!r} needs recall by meaning: install fermix-memory[semantic] and open"
            " the memory with an embedder (or ask for mode='keyword')")
    by_meaning = semantic if not keyword and key is None else None
    reader = cmd.reader
    where = memory_filter(reader, cmd.scope) if source in _WITH_MEMORIES else None
    history = history_filter(reader, cmd.scope) if key is None and source in _WITH_HISTORY else None
    dated = None if history is None or not query else dated_query(queries, query, history, cmd.as_of, now)
    if dated is not None and dated.only_dates:  # a date filter: that day's turns, nothing else searched
        assert history is not None
        waiting = None if by_meaning is None else by_meaning.waiting()
        return _result([], dated_turns(queries, history, dated, limit), limit, waiting)
    # A new query's vector is computed while the words are searched (ADR-0071).
    vector_soon = None if by_meaning is None else by_meaning.embed_query_soon(query)
    by_words = mode is not RecallMode.SEMANTIC
    memories = _memories(queries, cmd, where, limit) if by_words or key else []
    messages: list[MessageHit] = []
    if history is not None and by_words:
        messages = queries.search_history(query, history, limit)
    # Read while the vector may still be computing: neither depends on it.
    on_days = dated_turns(queries, history, dated, MAX_DATED) if history is not None and query and dated else []
    waiting = None if by_meaning is None else by_meaning.waiting()
    # The scopes' vectors too: only ranking them and reading the best rows wait for the vector.
    near_soon = None if by_meaning is None or not query.strip() else by_meaning.near_soon(where, history, limit)
    vector = None if vector_soon is None else vector_soon()
    if vector is not None and near_soon is not None:
        near, near_turns = near_soon(vector)
        memories = fuse_kind(memories, near, limit, _memory_id) if near else memories
        messages = fuse_kind(messages, near_turns, limit, _message_id) if near_turns else messages
    if history is not None and query:
        messages = _beside(messages, on_days, DATE_WEIGHT, limit)
        if messages:  # the hop starts from the best turns: without any, there is nothing to follow
            # The hop only adds turns: one the words found too keeps the place they gave it.
            found = {hit.message.id for hit in messages}
            hop = [hit for hit in second_hop(queries, history, query, messages) if hit.message.id not in found]
            messages = _beside(messages, hop, HOP_WEIGHT, limit)
    return _result(memories, messages, limit, waiting)


def _memories(queries: MemoryQueries, cmd: Recall, where: MemoryFilter | None, limit: int) -> list[MemoryHit]:
    """The rows matching ``cmd``'s key exactly, or its query by words."""
    if where is None:
        return []
    if cmd.key is not None:
        try:
            normalised = normalise_key(cmd.key)
        except InvalidIdentifier:
            normalised = None
        rows = queries.memory_by_key(where, normalised) if normalised else []
        return [MemoryHit(memory=row, rank=0.0, snippet=row.value) for row in rows[:limit]]
    return queries.search_memories(cmd.query, where, limit)


def _result(memories: list[MemoryHit], messages: list[MessageHit], limit: int, waiting: int | None) -> RecallResult:
    # One list alone is already in fused order (each list's ranks only grow, a reply right after its question).
    ranked = fuse(memories, messages, limit) if memories and messages else [*(memories or messages)][:limit]
    return RecallResult(memories=memories, messages=messages, ranked=ranked, vectors_waiting=waiting)


def _beside(messages: list[MessageHit], more: list[MessageHit], weight: float, limit: int) -> list[MessageHit]:
    """``messages`` and ``more`` as one list by reciprocal rank, ``more`` weighing ``weight``; a
    turn in both is kept as ``messages`` has it."""
    if not more:
        return messages
    return fuse_kind(messages, more, limit, _message_id, weight=weight)


def _memory_id(hit: MemoryHit) -> int:
    return hit.memory.id


def _message_id(hit: MessageHit) -> int:
    return hit.message.id
