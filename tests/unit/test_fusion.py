"""Reciprocal rank fusion of recall's lists (application/fusion.py, ADR-0076): a reply brought
along by keyword recall stays right after the question it replies to."""

from __future__ import annotations

from datetime import UTC, datetime

from fermix_memory.application.fusion import FUSION_K, SEMANTIC_WEIGHT, fuse, fuse_kind
from fermix_memory.application.query_ports import MemoryHit, MessageHit
from fermix_memory.domain.memory import Memory
from fermix_memory.domain.messages import Message
from fermix_memory.domain.values import Category, ConversationKey, Role, ScopeType

AT = datetime(2024, 5, 3, 12, 0, tzinfo=UTC)


def hit(message_id: int, context_of: int | None = None, similarity: float | None = None) -> MessageHit:
    where = ConversationKey(channel="chat", chat_id="c")
    message = Message(id=message_id, agent_id="a", owner_id="o", conversation=where, sender="s",
                      role=Role.USER, kind="text", content=f"turn {message_id}", created_at=AT)
    return MessageHit(message=message, rank=0.0, snippet="", context_of=context_of, similarity=similarity)


def ids(hits: list[MessageHit]) -> list[int]:
    return [h.message.id for h in hits]


def by_id(h: MessageHit) -> int:
    return h.message.id


def test_the_reply_stays_right_after_its_question_when_meaning_lifts_the_question() -> None:
    # Words: 1, then question 2 with its reply 3, then 4. Meaning: question 2 first, then 5, 6.
    keyword = [hit(1), hit(2), hit(3, context_of=2), hit(4)]
    semantic = [hit(2, similarity=0.9), hit(5, similarity=0.8), hit(6, similarity=0.7)]
    fused = ids(fuse_kind(keyword, semantic, 10, by_id, weight=1.0, k=60))
    assert fused[:2] == [2, 3]  # the lifted question, its reply right after it
    assert fused.index(3) == fused.index(2) + 1


def test_the_reply_stays_right_after_its_question_at_every_constant_and_weight() -> None:
    keyword = [hit(1), hit(7), hit(2), hit(3, context_of=2), hit(8), hit(9, context_of=8)]
    semantic = [hit(2), hit(5), hit(8), hit(6), hit(1)]
    for k in (1, 2, 5, 10, 60):
        for weight in (0.25, 0.5, 1.0, 1.5):
            fused = ids(fuse_kind(keyword, semantic, 10, by_id, weight=weight, k=k))
            assert fused.index(3) == fused.index(2) + 1, (k, weight, fused)
            assert fused.index(9) == fused.index(8) + 1, (k, weight, fused)


def test_a_reply_the_vector_list_lifts_above_its_question_stands_on_its_own() -> None:
    keyword = [hit(1), hit(2), hit(4), hit(5, context_of=4)]
    semantic = [hit(5, similarity=0.9), hit(6)]
    fused = fuse_kind(keyword, semantic, 10, by_id, weight=1.0, k=60)
    assert ids(fused)[0] == 5  # found by meaning on its own: first, no longer a reply
    assert fused[0].context_of is None and fused[0].similarity == 0.9
    assert ids(fused).index(4) > 0


def test_a_reply_found_by_meaning_below_its_question_still_follows_it() -> None:
    keyword = [hit(1), hit(4), hit(5, context_of=4), hit(2)]
    semantic = [hit(4), hit(6), hit(7), hit(5, similarity=0.5)]
    fused = fuse_kind(keyword, semantic, 10, by_id, weight=1.0, k=60)
    assert ids(fused)[:2] == [4, 5]
    assert fused[1].context_of == 4 and fused[1].similarity == 0.5  # kept as words found it, with its similarity


def test_the_limit_may_cut_a_reply_but_never_puts_anything_between() -> None:
    keyword = [hit(1), hit(2), hit(3, context_of=2)]
    semantic = [hit(4), hit(1), hit(5)]
    fused = ids(fuse_kind(keyword, semantic, 3, by_id, weight=1.0, k=60))
    assert fused == [1, 4, 2]  # the question is last: its reply falls past the limit


def test_without_replies_the_fusion_is_reciprocal_rank_with_the_vector_weight() -> None:
    keyword = [hit(1), hit(2), hit(3)]
    semantic = [hit(3), hit(4)]
    # k=1: 3 gets 1/4 + w/2, 1 gets 1/2, 2 gets 1/3, 4 gets w/3. With w=1.0, 3 (0.75) leads and
    # 2 ties 4 (keyword order first); with w=0.25, 1 leads.
    assert ids(fuse_kind(keyword, semantic, 10, by_id, weight=1.0, k=1)) == [3, 1, 2, 4]
    assert ids(fuse_kind(keyword, semantic, 10, by_id, weight=0.25, k=1)) == [1, 3, 2, 4]


def test_the_defaults_are_the_chosen_constant_and_weight() -> None:
    keyword = [hit(1), hit(2), hit(3), hit(4, context_of=3)]
    semantic = [hit(3), hit(5), hit(2)]
    assert fuse_kind(keyword, semantic, 10, by_id) == fuse_kind(keyword, semantic, 10, by_id, weight=SEMANTIC_WEIGHT,
                                                                 k=FUSION_K)


def row(memory_id: int) -> MemoryHit:
    memory = Memory(id=memory_id, agent_id="a", owner_id="o", scope_type=ScopeType.OWNER, scope_id="o",
                    category=Category.GOAL, key=f"k{memory_id}", value="v", created_at=AT, updated_at=AT)
    return MemoryHit(memory=memory, rank=0.0, snippet="v")


def test_fuse_keeps_a_reply_right_after_its_question_among_memory_rows() -> None:
    messages = fuse_kind([hit(1), hit(2), hit(3, context_of=2)], [hit(2), hit(6)], 10, by_id)
    ranked = fuse([row(100), row(101), row(102)], messages, 10)
    places = [h.message.id if isinstance(h, MessageHit) else -1 for h in ranked]
    assert [p for p in places if p > 0] == ids(messages)  # the messages' fused order holds
    assert places.index(3) == places.index(ids(messages)[ids(messages).index(3) - 1]) + 1
