"""Reciprocal rank fusion: how recall makes one list of hits whose scores are not comparable
(keyword against meaning, memory rows against messages): each list counts by rank alone."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import TypeVar

import attrs

from fermix_memory.application.query_ports import MemoryHit, MessageHit

H = TypeVar("H", MemoryHit, MessageHit)

# 1 / (FUSION_K + rank) from each list (the usual 60): lists whose scores are not comparable
# (different statistics, or words against meaning) are compared by rank.
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


def fuse(memories: list[MemoryHit], messages: list[MessageHit], limit: int) -> list[MemoryHit | MessageHit]:
    """Rows and messages as one list (1 / (FUSION_K + rank) in each list, equal weights; ties go
    to the memory row, a curated fact). A turn brought as the reply to a matching question
    shares that question's rank and stays right after it."""
    scored: list[tuple[float, int, int, MemoryHit | MessageHit]] = []
    for i, memory in enumerate(memories):
        scored.append((1.0 / (FUSION_K + i + 1), 0, 0, memory))
    for message, rank in zip(messages, ranks(messages), strict=True):
        scored.append((1.0 / (FUSION_K + rank), 1, 0 if message.context_of is None else 1, message))
    scored.sort(key=lambda row: (-row[0], row[1], row[2]))
    return [row[3] for row in scored[:limit]]


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
