"""Use case: recall memories and/or history for a reader, by key or full-text query (R-FTS)."""

from __future__ import annotations

import attrs

from fermix_memory.application.ports import MemoryHit, MemoryQueries, MessageHit
from fermix_memory.domain.errors import InvalidIdentifier
from fermix_memory.domain.scopes import (
    Reader,
    RecallScope,
    RecallSource,
    history_filter,
    memory_filter,
)
from fermix_memory.domain.values import check_int, normalise_key

MAX_RECALL = 100
# Reciprocal rank fusion constant (the usual 60): the two lists' scores are not comparable
# (different statistics), their ranks are.
FUSION_K = 60


@attrs.frozen(kw_only=True)
class RecallResult:
    memories: list[MemoryHit] = attrs.field(factory=list)
    messages: list[MessageHit] = attrs.field(factory=list)
    # Both lists as one, best first (``source="all"``; otherwise the one list asked for).
    ranked: list[MemoryHit | MessageHit] = attrs.field(factory=list)


def fuse(memories: list[MemoryHit], messages: list[MessageHit], limit: int) -> list[MemoryHit | MessageHit]:
    """One list by reciprocal rank fusion (1 / (FUSION_K + rank) in each list, equal weights;
    ties go to the memory row, a curated fact). A turn brought as the reply to a matching
    question shares that question's rank and stays right after it."""
    scored: list[tuple[float, int, int, MemoryHit | MessageHit]] = []
    for i, memory in enumerate(memories):
        scored.append((1.0 / (FUSION_K + i + 1), 0, 0, memory))
    position = 0
    for message in messages:
        if message.context_of is None:
            position += 1
        scored.append((1.0 / (FUSION_K + position), 1, 0 if message.context_of is None else 1, message))
    scored.sort(key=lambda row: (-row[0], row[1], row[2]))
    return [row[3] for row in scored[:limit]]


def recall(
    queries: MemoryQueries,
    reader: Reader,
    *,
    query: str = "",
    key: str | None = None,
    scope: RecallScope = RecallScope.CURRENT,
    source: RecallSource = RecallSource.MEMORIES,
    limit: int = 10,
) -> RecallResult:
    """Rows and messages ``reader`` may see that match ``key`` exactly or ``query`` by FTS.

    A job run only ever gets its own job rows (never history), whatever it asks.
    """
    limit = min(check_int(limit, "limit", minimum=0), MAX_RECALL)
    memories: list[MemoryHit] = []
    messages: list[MessageHit] = []
    if source in (RecallSource.MEMORIES, RecallSource.ALL):
        where = memory_filter(reader, scope)
        if key is not None:
            try:
                normalised = normalise_key(key)
            except InvalidIdentifier:
                normalised = None
            rows = queries.memory_by_key(where, normalised) if normalised else []
            memories = [MemoryHit(memory=row, rank=0.0, snippet=row.value) for row in rows[:limit]]
        else:
            memories = queries.search_memories(query, where, limit)
    history = history_filter(reader, scope)
    if history is not None and key is None and source in (RecallSource.HISTORY, RecallSource.ALL):
        messages = queries.search_history(query, history, limit)
    return RecallResult(memories=memories, messages=messages, ranked=fuse(memories, messages, limit))
