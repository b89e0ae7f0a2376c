"""Admission (R-CAT, R-OPS, R-ISOLATION): pure decisions over a tiny in-memory row lookup."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from fermix_memory.domain.admission import AdmissionPolicy, WriteContext
from fermix_memory.domain.event_base import DomainEvent, Provenance
from fermix_memory.domain.memory import MAX_VALUE_CHARS, Memory
from fermix_memory.domain.memory_events import (
    MemoryAdded,
    MemoryArchived,
    MemoryReplaced,
    MemoryRestored,
    OperationRefused,
)
from fermix_memory.domain.operations import AddOperation, ArchiveOperation, Operation, ReplaceOperation
from fermix_memory.domain.scopes import Reader, RecallScope, WriterKind, memory_filter, write_scope
from fermix_memory.domain.values import (
    Category,
    ConversationKey,
    PromoteTarget,
    Scope,
    ScopeType,
    Trust,
    normalise_key,
)

AT = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
T0 = datetime(2026, 1, 1, tzinfo=UTC)
POLICY = AdmissionPolicy()
CONV = ConversationKey("telegram", "42")
OTHER_CONV = ConversationKey("slack", "C1", "thread:1")


class FakeRows:
    """A RowLookup over a dict of rows by id."""

    def __init__(self, rows: list[Memory] = ()) -> None:  # type: ignore[assignment]
        self.rows = {r.id: r for r in rows}

    def by_id(self, memory_id: int) -> Memory | None:
        return self.rows.get(memory_id)

    def by_key(self, agent_id: str, owner_id: str, scope: Scope, key: str) -> Memory | None:
        for r in self.rows.values():
            if (r.agent_id, r.owner_id, r.scope_type, r.scope_id, r.key) == (agent_id, owner_id, scope.type,
                                                                             scope.id, key):
                return r
        return None


def mem(memory_id: int, owner: str, scope_type: ScopeType, scope_id: str, category: Category, key: str,
        value: str = "a value", *, agent: str = "ada", archived: bool = False,
        promote: PromoteTarget | str | None = "auto") -> Memory:
    target = category.promote_target if promote == "auto" else promote
    return Memory(id=memory_id, agent_id=agent, owner_id=owner, scope_type=scope_type, scope_id=scope_id,
                  category=category, key=key, value=value, promote_target=target,  # type: ignore[arg-type]
                  archived_at=T0 if archived else None, archived_by="operator" if archived else None,
                  archive_reason="old" if archived else None, created_at=T0, updated_at=T0)


ROWS = [
    mem(1, "alice", ScopeType.OWNER, "alice", Category.PREFERENCE, "coffee", "Flat white"),
    mem(2, "alice", ScopeType.AGENT, "ada", Category.DIRECTIVE, "tone", "Be formal"),
    mem(3, "alice", ScopeType.AGENT, "ada", Category.CONTEXT, "project", "Ships in May"),
    mem(4, "bob", ScopeType.OWNER, "bob", Category.IDENTITY, "name", "Bob"),
    mem(5, "alice", ScopeType.CONVERSATION, CONV.scope_id, Category.CONTEXT, "note", "In chat", promote=None),
    mem(6, "alice", ScopeType.JOB, "nightly", Category.GOAL, "report", "Daily", promote=None),
    mem(7, "alice", ScopeType.OWNER, "alice", Category.GOAL, "marathon", "Run it", archived=True),
    mem(8, "alice", ScopeType.OWNER, "alice", Category.IDENTITY, "name", "Alice", agent="other-agent"),
    mem(9, "bob", ScopeType.AGENT, "ada", Category.DIRECTIVE, "tone", "Be brief"),
    mem(10, "alice", ScopeType.CONVERSATION, OTHER_CONV.scope_id, Category.DIRECTIVE, "conv_rule", "Only here",
        promote=None),
]


def ctx(writer: WriterKind = WriterKind.REVIEWER, trust: Trust = Trust.OPERATOR, *, owner: str = "alice",
        agent: str = "ada", conversation: ConversationKey | None = CONV, job: str | None = None) -> WriteContext:
    return WriteContext(
        writer=writer,
        reader=Reader(agent_id=agent, owner_id=owner, conversation=conversation, job_source_id=job),
        provenance=Provenance(agent_id=agent, owner_id=owner, trust=trust, source_type="test"),
    )


def decide(op: Operation, context: WriteContext | None = None, rows: list[Memory] = ROWS) -> list[DomainEvent]:
    return POLICY.decide(op, context or ctx(), FakeRows(rows), AT)


def refusal(events: list[DomainEvent]) -> str:
    assert len(events) == 1 and isinstance(events[0], OperationRefused), events
    return events[0].reason


# --- properties --------------------------------------------------------------------------------------


weird = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.floats(), st.lists(st.integers(), max_size=2),
                  st.dictionaries(st.text(max_size=3), st.integers(), max_size=1))
categories = st.one_of(st.sampled_from([c.value for c in Category]), st.text(max_size=12), weird)
keys = st.one_of(st.sampled_from(["coffee", "tone", "project", "name", "note", "report", "marathon",
                                  "Coffee", " TONE ", "conv_rule"]), st.text(max_size=80), weird)
values = st.one_of(st.text(max_size=260), st.sampled_from(["Flat white", "Be formal", " ", "x" * 2000,
                                                           "x" * 2001, "word " * 500]), weird)
confidences = st.one_of(st.floats(), st.integers(-5, 5), st.sampled_from([0, 1, 0.5, 1.0]), weird)
ids = st.one_of(st.integers(-2, 12), st.integers(), weird)
ops = st.one_of(
    st.builds(AddOperation, category=categories, key=keys, value=values, confidence=confidences),
    st.builds(ReplaceOperation, id=ids, value=st.one_of(st.none(), values), category=st.one_of(st.none(), categories),
              key=st.one_of(st.none(), keys), confidence=st.one_of(st.none(), confidences)),
    st.builds(ArchiveOperation, id=ids, reason=st.one_of(st.text(max_size=600), weird)),
)
contexts = st.builds(
    ctx,
    writer=st.sampled_from(list(WriterKind)),
    trust=st.sampled_from(list(Trust)),
    owner=st.sampled_from(["alice", "bob", "carol"]),
    agent=st.sampled_from(["ada", "other-agent"]),
    conversation=st.sampled_from([None, CONV, OTHER_CONV]),
    job=st.sampled_from([None, None, "nightly", "weekly"]),
)
row_sets = st.lists(st.sampled_from(ROWS), unique_by=lambda r: r.id).map(list)


@settings(max_examples=400)
@given(op=ops, context=contexts, rows=row_sets)
def test_decide_never_raises_and_returns_at_most_one_event(op: Operation, context: WriteContext,
                                                           rows: list[Memory]) -> None:
    events = POLICY.decide(op, context, FakeRows(rows), AT)
    assert isinstance(events, list) and len(events) <= 1
    assert all(isinstance(e, DomainEvent) for e in events)
    for e in events:
        assert e.at == AT
        assert e.provenance == context.provenance  # type: ignore[attr-defined]
        assert not isinstance(e, MemoryRestored)
    # The decision is a pure function of its inputs.
    assert POLICY.decide(op, context, FakeRows(rows), AT) == events


@settings(max_examples=400)
@given(op=ops, context=contexts, rows=row_sets)
def test_what_admission_lets_through_respects_trust_owner_and_limits(op: Operation, context: WriteContext,
                                                                     rows: list[Memory]) -> None:
    lookup = FakeRows(rows)
    reader = context.reader
    for e in POLICY.decide(op, context, lookup, AT):
        if isinstance(e, MemoryAdded | MemoryReplaced) and context.trust is Trust.GUEST:
            assert e.category is not Category.DIRECTIVE
        if isinstance(e, MemoryAdded):
            assert e.owner_id == reader.owner_id and e.agent_id == reader.agent_id
            scope = write_scope(context.writer, e.category, reader)
            assert scope is not None and (e.scope_type, e.scope_id) == (scope.type, scope.id)
            assert lookup.by_key(e.agent_id, e.owner_id, scope, e.key) is None
        if isinstance(e, MemoryAdded | MemoryReplaced):
            assert 0 < len(e.value) <= MAX_VALUE_CHARS and e.value == e.value.strip()
            assert not any(ord(c) < 32 and c != "\n" for c in e.value)
            assert e.key == normalise_key(e.key)
            assert isinstance(e.confidence, float) and 0.0 <= e.confidence <= 1.0
            assert not math.isnan(e.confidence)
        if isinstance(e, MemoryReplaced | MemoryArchived):
            target = lookup.by_id(e.memory_id)
            assert target is not None
            assert target.owner_id == reader.owner_id and target.agent_id == reader.agent_id
            assert memory_filter(reader, RecallScope.ALL).admits(target)
            if context.trust is Trust.GUEST:
                assert target.category is not Category.DIRECTIVE
        if isinstance(e, MemoryReplaced):
            target = lookup.by_id(e.memory_id)
            assert target is not None and e.previous_value == target.value
            assert e.category.is_profile == target.category.is_profile


@settings(max_examples=500)
@given(op=ops, context=contexts)
def test_a_guest_never_writes_a_directive(op: Operation, context: WriteContext) -> None:
    guest = attrs.evolve(context, provenance=attrs.evolve(context.provenance, trust=Trust.GUEST))
    for e in POLICY.decide(op, guest, FakeRows(ROWS), AT):
        if isinstance(e, MemoryAdded | MemoryReplaced):
            assert e.category is not Category.DIRECTIVE
        if isinstance(e, MemoryReplaced | MemoryArchived):
            assert ROWS[e.memory_id - 1].category is not Category.DIRECTIVE


@settings(max_examples=300)
@given(memory_id=st.sampled_from([r.id for r in ROWS]), context=contexts)
def test_no_writer_touches_another_owners_row(memory_id: int, context: WriteContext) -> None:
    target = ROWS[memory_id - 1]
    for op in (ReplaceOperation(id=memory_id, value="hijacked"), ArchiveOperation(id=memory_id)):
        events = decide(op, context)
        if target.owner_id != context.reader.owner_id or target.agent_id != context.reader.agent_id:
            assert refusal(events) == "not_visible"


# --- examples ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("trust", list(Trust))
def test_a_directive_needs_the_operator(trust: Trust) -> None:
    events = decide(AddOperation(category="directive", key="new_rule", value="Always cite"), ctx(trust=trust))
    if trust is Trust.OPERATOR:
        assert isinstance(events[0], MemoryAdded) and events[0].scope_type is ScopeType.AGENT
    else:
        assert refusal(events) == "guest_directive"
        refused = events[0]
        assert isinstance(refused, OperationRefused)
        assert refused.category == "directive" and refused.key == "new_rule" and refused.op == "add"


def test_a_guest_cannot_touch_an_existing_directive_row() -> None:
    guest = ctx(trust=Trust.GUEST)
    assert refusal(decide(ReplaceOperation(id=2, value="Be rude"), guest)) == "guest_directive"
    assert refusal(decide(ArchiveOperation(id=2), guest)) == "guest_directive"
    assert refusal(decide(AddOperation(category="context", key="tone", value="Be rude"), guest)) == "guest_directive"
    assert refusal(decide(ReplaceOperation(id=3, category="directive"), guest)) == "guest_directive"


def test_a_guest_may_write_profile_and_context_rows() -> None:
    guest = ctx(trust=Trust.GUEST)
    for category in ("identity", "preference", "interest", "goal", "context"):
        events = decide(AddOperation(category=category, key="fresh_key", value="v"), guest)
        assert isinstance(events[0], MemoryAdded), category


def test_the_owner_scope_mapping_on_add() -> None:
    profile = decide(AddOperation(category="goal", key="fresh", value="v"))[0]
    work = decide(AddOperation(category="context", key="fresh", value="v"))[0]
    tool = decide(AddOperation(category="preference", key="fresh", value="v"), ctx(WriterKind.TOOL))[0]
    job = decide(AddOperation(category="preference", key="fresh", value="v"), ctx(WriterKind.JOB, job="nightly"))[0]
    assert isinstance(profile, MemoryAdded) and (profile.scope_type, profile.scope_id) == (ScopeType.OWNER, "alice")
    assert isinstance(work, MemoryAdded) and (work.scope_type, work.scope_id) == (ScopeType.AGENT, "ada")
    assert isinstance(tool, MemoryAdded) and (tool.scope_type, tool.scope_id) == (ScopeType.CONVERSATION,
                                                                                  CONV.scope_id)
    assert isinstance(job, MemoryAdded) and (job.scope_type, job.scope_id) == (ScopeType.JOB, "nightly")
    # Tool and job rows never render into the prompt files; reviewer rows do.
    assert profile.promote_target is PromoteTarget.USER_MD and work.promote_target is PromoteTarget.MEMORY_MD
    assert tool.promote_target is None and job.promote_target is None
    assert refusal(decide(AddOperation(category="goal", key="k", value="v"), ctx(WriterKind.JOB))) == "no_scope"
    assert refusal(decide(AddOperation(category="goal", key="k", value="v"),
                          ctx(WriterKind.TOOL, conversation=None))) == "no_scope"


def test_add_of_an_existing_key_replaces_with_the_previous_value() -> None:
    events = decide(AddOperation(category="preference", key="Coffee", value="Oat flat white"))
    assert len(events) == 1 and isinstance(events[0], MemoryReplaced)
    assert events[0].memory_id == 1 and events[0].previous_value == "Flat white"
    assert events[0].value == "Oat flat white"


def test_an_identical_restatement_changes_nothing() -> None:
    assert decide(AddOperation(category="preference", key="coffee", value="  Flat white ")) == []
    assert decide(ReplaceOperation(id=1, value="Flat white")) == []
    assert decide(ReplaceOperation(id=1)) == []


def test_a_restatement_of_an_archived_row_brings_it_back() -> None:
    events = decide(AddOperation(category="goal", key="marathon", value="Run it"))
    assert isinstance(events[0], MemoryReplaced) and events[0].memory_id == 7


@pytest.mark.parametrize("category", ["gossip", "", "Preference", " goal", "USER", None, 3, ["goal"]])
def test_unknown_categories_are_refused(category: Any) -> None:
    assert refusal(decide(AddOperation(category=category, key="k", value="v"))) == "unknown_category"


@pytest.mark.parametrize(("value", "reason"), [("x" * 2001, "value_too_long"), ("", "empty_value"),
                                               ("\x00\x01 ", "empty_value"), (None, "invalid_value"),
                                               (42, "invalid_value")])
def test_bad_values_are_refused(value: Any, reason: str) -> None:
    op = AddOperation(category="goal", key="k", value=value)
    assert refusal(decide(op, ctx(WriterKind.OPERATOR))) == reason


def test_a_value_of_exactly_the_stored_bound_is_admitted_whole() -> None:
    assert MAX_VALUE_CHARS == 2000
    for writer in WriterKind:
        events = decide(AddOperation(category="goal", key="k", value="y" * 2000), ctx(writer, job="nightly"))
        assert isinstance(events[0], MemoryAdded) and events[0].value == "y" * 2000, writer


def test_a_reviewer_fact_over_200_characters_is_stored_whole() -> None:
    fact = "Works on " + "the long migration of the billing system " * 8
    events = decide(AddOperation(category="context", key="migration", value=fact))
    assert isinstance(events[0], MemoryAdded) and events[0].value == fact.strip()


def test_a_reviewer_fact_over_the_stored_bound_is_cut_at_a_word_boundary_with_a_marker() -> None:
    fact = "Plans " + "a careful walk through every street of Lisbon " * 60
    for op in (AddOperation(category="goal", key="walk", value=fact),
               ReplaceOperation(id=1, value=fact)):
        [event] = decide(op)
        assert isinstance(event, MemoryAdded | MemoryReplaced)
        assert len(event.value) <= MAX_VALUE_CHARS and event.value.endswith("…")
        assert fact.startswith(event.value[:-1]) and fact[len(event.value) - 1] == " "
    # Anybody else is refused, and told so (the caller can shorten and retry).
    for writer in (WriterKind.OPERATOR, WriterKind.TOOL, WriterKind.JOB):
        refused = decide(AddOperation(category="goal", key="walk", value=fact), ctx(writer, job="nightly"))
        assert refusal(refused) == "value_too_long"


def test_a_directive_cannot_turn_into_a_private_row_or_back() -> None:
    """A directive is every owner's Working Rule, a context row its owner's alone: switching
    would change who sees the row, so it is refused like a move between the prompt files."""
    for op in (ReplaceOperation(id=2, category="context"), ReplaceOperation(id=3, category="directive"),
               AddOperation(category="context", key="tone", value="Be formal"),
               AddOperation(category="directive", key="project", value="Ship in May")):
        assert refusal(decide(op, ctx(WriterKind.OPERATOR))) == "category_changes_scope", op


@pytest.mark.parametrize("confidence", [-0.1, 1.0001, math.nan, math.inf, -math.inf, True, "0.5", None, 2])
def test_bad_confidences_are_refused(confidence: Any) -> None:
    assert refusal(decide(AddOperation(category="goal", key="k", value="v", confidence=confidence))) == \
        "invalid_confidence"


@pytest.mark.parametrize("memory_id", [999, -1, 0, True, "1", None, 1.0])
def test_replace_and_archive_of_an_unknown_or_malformed_id_are_refused(memory_id: Any) -> None:
    for op in (ReplaceOperation(id=memory_id, value="v"), ArchiveOperation(id=memory_id)):
        assert refusal(decide(op)) in ("not_visible", "invalid_id")


def test_rows_of_another_owner_agent_or_job_are_not_visible() -> None:
    for memory_id in (4, 8, 9):  # bob's row, another agent's row, bob's directive
        assert refusal(decide(ReplaceOperation(id=memory_id, value="x"))) == "not_visible"
        assert refusal(decide(ArchiveOperation(id=memory_id))) == "not_visible"
    # A job run only reaches its own job rows.
    in_job = ctx(WriterKind.JOB, job="weekly")
    assert refusal(decide(ArchiveOperation(id=6), in_job)) == "not_visible"
    assert refusal(decide(ArchiveOperation(id=1), in_job)) == "not_visible"
    assert isinstance(decide(ArchiveOperation(id=6), ctx(WriterKind.JOB, job="nightly"))[0], MemoryArchived)


def test_a_replace_may_not_move_a_row_between_files_or_onto_a_taken_key() -> None:
    assert refusal(decide(ReplaceOperation(id=1, category="context"))) == "category_changes_scope"
    assert refusal(decide(ReplaceOperation(id=3, category="goal"))) == "category_changes_scope"
    assert refusal(decide(ReplaceOperation(id=3, key="tone"))) == "key_conflict"


def test_archive_twice_is_unchanged_and_restore_rules() -> None:
    assert decide(ArchiveOperation(id=7)) == []
    lookup = FakeRows(ROWS)
    restored = POLICY.restore(7, ctx(WriterKind.OPERATOR), lookup, AT)
    assert len(restored) == 1 and isinstance(restored[0], MemoryRestored) and restored[0].memory_id == 7
    assert POLICY.restore(1, ctx(WriterKind.OPERATOR), lookup, AT) == []
    unknown = POLICY.restore(999, ctx(WriterKind.OPERATOR), lookup, AT)
    assert refusal(unknown) == "unknown_memory"


def test_the_refusal_carries_the_operation_and_provenance() -> None:
    context = ctx(trust=Trust.GUEST)
    refused = decide(ReplaceOperation(id=4, value="x"), context)[0]
    assert isinstance(refused, OperationRefused)
    assert refused.op == "replace" and refused.memory_id == 4 and refused.provenance == context.provenance


def test_a_huge_integer_confidence_is_refused() -> None:
    assert refusal(decide(AddOperation(category="goal", key="k", value="v", confidence=10**400))) == \
        "invalid_confidence"


def test_a_tool_write_in_a_long_non_ascii_conversation_does_not_raise() -> None:
    long_conv = ConversationKey("telegram", "\U0001f600" * 256)
    events = decide(AddOperation(category="context", key="k", value="v"), ctx(WriterKind.TOOL,
                                                                             conversation=long_conv))
    assert len(events) == 1
