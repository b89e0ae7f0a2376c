"""Use case: recall memories and/or history for a reader, by key or full-text query (R-FTS)."""

from __future__ import annotations

import attrs

from fermix_memory.application.errors import SemanticRecallUnavailable
from fermix_memory.application.ports import MemoryHit, MemoryQueries, MessageHit
from fermix_memory.application.semantic import FUSION_K, SemanticSearch, fuse_kind, ranks
from fermix_memory.domain.errors import InvalidIdentifier
from fermix_memory.domain.scopes import (
    Reader,
    RecallMode,
    RecallScope,
    RecallSource,
    history_filter,
    memory_filter,
)
from fermix_memory.domain.values import check_int, normalise_key

MAX_RECALL = 100


@attrs.frozen(kw_only=True)
class RecallResult:
    memories: list[MemoryHit] = attrs.field(factory=list)
    messages: list[MessageHit] = attrs.field(factory=list)
    # Both lists as one, best first (``source="all"``; otherwise the one list asked for).
    ranked: list[MemoryHit | MessageHit] = attrs.field(factory=list)
    # A search by meaning: how many texts (messages and rows, in the whole store) still wait for
    # their vector, so unseen by it; ``None`` when nothing was searched by meaning.
    vectors_waiting: int | None = None


def fuse(memories: list[MemoryHit], messages: list[MessageHit], limit: int) -> list[MemoryHit | MessageHit]:
    """One list by reciprocal rank fusion (1 / (FUSION_K + rank) in each list, equal weights;
    ties go to the memory row, a curated fact). A turn brought as the reply to a matching
    question shares that question's rank and stays right after it."""
    scored: list[tuple[float, int, int, MemoryHit | MessageHit]] = []
    for i, memory in enumerate(memories):
        scored.append((1.0 / (FUSION_K + i + 1), 0, 0, memory))
    for message, rank in zip(messages, ranks(messages), strict=True):
        scored.append((1.0 / (FUSION_K + rank), 1, 0 if message.context_of is None else 1, message))
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
    mode: RecallMode | None = None,
    semantic: SemanticSearch | None = None,
) -> RecallResult:
    """Rows and messages ``reader`` may see that match ``key`` exactly, or ``query`` by its words
    (``mode="keyword"``), by meaning (``"semantic"``, with ``semantic``'s vectors) or both fused
    per kind (``"hybrid"``). ``mode=None``: hybrid when there is an embedder, else keyword.

    A job run only ever gets its own job rows (never history), whatever it asks.
    """
    limit = min(check_int(limit, "limit", minimum=0), MAX_RECALL)
    if mode is None:
        mode = RecallMode.KEYWORD if semantic is None else RecallMode.HYBRID
    if mode is not RecallMode.KEYWORD and semantic is None:
        raise SemanticRecallUnavailable(
            f"recall mode {mode.value!r} needs recall by meaning: install fermix-memory[semantic] and open"
            " the memory with an embedder (or ask for mode='keyword')")
    vector = semantic.embed_query(query) if semantic is not None and mode is not RecallMode.KEYWORD \
        and key is None else None
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
            keyword = queries.search_memories(query, where, limit) if mode is not RecallMode.SEMANTIC else []
            near = semantic.memories(vector, where, limit) if vector is not None and semantic is not None else []
            memories = fuse_kind(keyword, near, limit, _memory_id) if near else keyword
    history = history_filter(reader, scope)
    if history is not None and key is None and source in (RecallSource.HISTORY, RecallSource.ALL):
        keyword_turns = queries.search_history(query, history, limit) if mode is not RecallMode.SEMANTIC else []
        near_turns = semantic.history(vector, history, limit) if semantic is not None and vector is not None else []
        messages = fuse_kind(keyword_turns, near_turns, limit, _message_id) if near_turns else keyword_turns
    waiting = semantic.waiting() if semantic is not None and mode is not RecallMode.KEYWORD and key is None else None
    return RecallResult(memories=memories, messages=messages, ranked=fuse(memories, messages, limit),
                        vectors_waiting=waiting)


def _memory_id(hit: MemoryHit) -> int:
    return hit.memory.id


def _message_id(hit: MessageHit) -> int:
    return hit.message.id
