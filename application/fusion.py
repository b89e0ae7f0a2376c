"""Reciprocal rank fusion: how recall makes one list of hits whose scores are not comparable
(keyword against meaning, memory rows against messages): each list counts by rank alone."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from itertools import pairwise
from typing import Any, TypeVar

import attrs

from fermix_memory.application.query_ports import MemoryHit, MessageHit

H = TypeVar("H", MemoryHit, MessageHit)

# 1 / (FUSION_K + rank) from the keyword list, SEMANTIC_WEIGHT / (FUSION_K + rank) from the
# vector list: lists whose scores are not comparable (different statistics, or words against
# meaning) are compared by rank. Chosen on our own evaluation, one half of the conversations
# held out (benchmarks/fusion_tuning.py, ADR-0076; the usual 60 and 1 before): a small constant
# lets each list's first hits lead.
FUSION_K = 2
SEMANTIC_WEIGHT = 1.25


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
              weight: float = SEMANTIC_WEIGHT, k: int = FUSION_K) -> list[H]:
    """One kind's keyword and vector hits as one list, by reciprocal rank (``1 / (k + rank)``
    from the keyword list, ``weight / (k + rank)`` from the vector list); a hit in both lists
    counts twice and is kept as keyword recall found it (its snippet, the question it answers),
    with its similarity. A keyword hit brought as the reply to a matching question shares that
    question's rank and stays RIGHT AFTER it, whatever the vector list adds to the question;
    only a reply the vector list lifts above its question stands on its own (no longer marked
    as a reply). Ties keep keyword order, then vector order."""
    scores: dict[Hashable, float] = {}
    hits: dict[Hashable, H] = {}  # in first-seen order: keyword hits, then the vector list's others
    for hit, rank in zip(keyword, ranks(keyword), strict=True):
        key = identity(hit)
        hits.setdefault(key, hit)
        scores[key] = 1.0 / (k + rank)
    for rank, hit in enumerate(semantic, 1):
        key = identity(hit)
        found = hits.setdefault(key, hit)
        if found is not hit and hit.similarity is not None:  # found by words too: kept so, with its similarity
            hits[key] = attrs.evolve(found, similarity=hit.similarity)
        scores[key] = scores.get(key, 0.0) + weight / (k + rank)
    groups = _with_replies(keyword, hits, scores, identity)
    for lead, members in groups.items():
        if len(members) == 1 and isinstance(reply := hits[lead], MessageHit) and reply.context_of is not None:
            hits[lead] = _on_its_own(reply)  # found by meaning above its question
    order = {key: i for i, key in enumerate(hits)}
    best = sorted(groups, key=lambda lead: (-scores[lead], order[lead]))
    return [hits[key] for lead in best for key in groups[lead]][:limit]


# Through a mapping: a type variable narrowed by isinstance does not show MessageHit's fields to the type checker.
_NOT_A_REPLY: dict[str, Any] = {"context_of": None}


def _on_its_own(hit: H) -> H:
    """``hit`` no longer marked as the reply to a question."""
    return attrs.evolve(hit, **_NOT_A_REPLY) if isinstance(hit, MessageHit) else hit


def _with_replies(keyword: Sequence[H], hits: dict[Hashable, H], scores: dict[Hashable, float],
                  identity: Callable[[H], Hashable]) -> dict[Hashable, list[Hashable]]:
    """Every hit's key, in first-seen order, each leading its group: itself, then the keyword
    hit brought as its reply (``context_of``: the turn right after it in the keyword list),
    unless the reply scores above its question (the vector list found it on its own)."""
    groups: dict[Hashable, list[Hashable]] = {}
    replies: set[Hashable] = set()
    for before, hit in pairwise(keyword):
        if (isinstance(hit, MessageHit) and isinstance(before, MessageHit) and identity(before) not in replies
                and hit.context_of == before.message.id and scores[identity(hit)] <= scores[identity(before)]):
            replies.add(identity(hit))
            groups[identity(before)] = [identity(before), identity(hit)]
    for key in hits:
        if key not in replies:
            groups.setdefault(key, [key])
    return {key: groups[key] for key in hits if key in groups}
