"""Admission (R-CAT, R-OPS, R-ISOLATION): pure decisions over a tiny in-memory row lookup; what
admission LETS THROUGH, not only what it refuses, and its exact limits (confidence 0 and 1, the
largest row id, the 2,000-character value)."""

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


@settings(max_examples=200)
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


@settings(max_examples=200)
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


@settings(max_examples=200)
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


LARGEST_ROW_ID = 9223372036854775807  # SQLite's largest rowid, 2**63 - 1

# Rows of alice in two conversations of the same owner.
IN_A = mem(20, "alice", ScopeType.CONVERSATION, CONV.scope_id, Category.CONTEXT, "a_note", "In A", promote=None)
IN_B = mem(21, "alice", ScopeType.CONVERSATION, OTHER_CONV.scope_id, Category.CONTEXT, "b_note", "In B",
           promote=None)
TWO_CONVERSATIONS = [*ROWS, IN_A, IN_B]


@pytest.mark.parametrize("writer", [WriterKind.REVIEWER, WriterKind.TOOL])
def test_reviewer_and_tool_in_one_conversation_cannot_change_rows_of_another_conversation_of_the_owner(
    writer: WriterKind,
) -> None:
    in_a = ctx(writer, conversation=CONV)
    assert refusal(decide(ReplaceOperation(id=21, value="hijacked"), in_a, TWO_CONVERSATIONS)) == "not_visible"
    assert refusal(decide(ArchiveOperation(id=21), in_a, TWO_CONVERSATIONS)) == "not_visible"
    # ... while the rows of their own conversation are theirs to change.
    [replaced] = decide(ReplaceOperation(id=20, value="changed"), in_a, TWO_CONVERSATIONS)
    assert isinstance(replaced, MemoryReplaced) and replaced.memory_id == 20
    [archived] = decide(ArchiveOperation(id=20), in_a, TWO_CONVERSATIONS)
    assert isinstance(archived, MemoryArchived) and archived.memory_id == 20


def test_the_operator_may_change_a_row_of_any_conversation_of_the_owner() -> None:
    operator_in_a = ctx(WriterKind.OPERATOR, conversation=CONV)
    [replaced] = decide(ReplaceOperation(id=21, value="fixed"), operator_in_a, TWO_CONVERSATIONS)
    assert isinstance(replaced, MemoryReplaced) and replaced.memory_id == 21
    [archived] = decide(ArchiveOperation(id=21), ctx(WriterKind.OPERATOR, conversation=None), TWO_CONVERSATIONS)
    assert isinstance(archived, MemoryArchived) and archived.archived_by == "operator"


@pytest.mark.parametrize("writer", [WriterKind.REVIEWER, WriterKind.OPERATOR])
def test_a_guest_can_replace_and_archive_an_ordinary_row(writer: WriterKind) -> None:
    guest = ctx(writer, trust=Trust.GUEST)
    [replaced] = decide(ReplaceOperation(id=1, value="Oat flat white"), guest)
    assert isinstance(replaced, MemoryReplaced) and replaced.value == "Oat flat white"
    assert replaced.previous_value == "Flat white" and replaced.provenance == guest.provenance
    [archived] = decide(ArchiveOperation(id=3, reason="done"), guest)
    assert isinstance(archived, MemoryArchived) and archived.memory_id == 3


def test_the_operator_can_edit_and_archive_a_directive_by_id() -> None:
    operator = ctx(WriterKind.OPERATOR, trust=Trust.OPERATOR)
    [replaced] = decide(ReplaceOperation(id=2, value="Be warm"), operator)
    assert isinstance(replaced, MemoryReplaced) and replaced.value == "Be warm"
    assert replaced.category is Category.DIRECTIVE
    [archived] = decide(ArchiveOperation(id=2), operator)
    assert isinstance(archived, MemoryArchived) and archived.memory_id == 2
    # An operator-trusted restatement of an existing directive key replaces it.
    [restated] = decide(AddOperation(category="directive", key="tone", value="Be warm"), operator)
    assert isinstance(restated, MemoryReplaced) and restated.memory_id == 2


def test_a_replace_onto_a_free_key_renames_the_row() -> None:
    [replaced] = decide(ReplaceOperation(id=3, key="Project Name"))
    assert isinstance(replaced, MemoryReplaced)
    assert (replaced.memory_id, replaced.key, replaced.value) == (3, "project_name", "Ships in May")


def test_a_replace_onto_its_own_key_spelled_differently_changes_nothing() -> None:
    assert decide(ReplaceOperation(id=3, key=" Project ")) == []


def test_a_replace_keeps_an_unrendered_row_unrendered_and_a_rendered_row_in_its_file() -> None:
    [tool_row] = decide(ReplaceOperation(id=5, value="still in chat"))
    assert isinstance(tool_row, MemoryReplaced) and tool_row.promote_target is None
    [profile] = decide(ReplaceOperation(id=1, category="identity"))
    assert isinstance(profile, MemoryReplaced)
    assert profile.category is Category.IDENTITY and profile.promote_target is PromoteTarget.USER_MD
    # A row whose target was lost is not given one back by a change of category.
    lost = mem(30, "alice", ScopeType.OWNER, "alice", Category.GOAL, "lost", "v", promote=None)
    [kept] = decide(ReplaceOperation(id=30, category="interest"), rows=[lost])
    assert isinstance(kept, MemoryReplaced) and kept.promote_target is None


def test_a_replace_of_only_the_confidence_is_recorded() -> None:
    [replaced] = decide(ReplaceOperation(id=1, confidence=0.25))
    assert isinstance(replaced, MemoryReplaced) and replaced.confidence == 0.25
    assert replaced.value == "Flat white" and replaced.key == "coffee" and replaced.category is Category.PREFERENCE


def test_a_restatement_with_another_confidence_or_file_target_is_recorded() -> None:
    [replaced] = decide(AddOperation(category="preference", key="coffee", value="Flat white", confidence=0.5))
    assert isinstance(replaced, MemoryReplaced) and replaced.confidence == 0.5
    # The same statement from a tool row's perspective: the reviewer makes it render.
    [rendered] = decide(AddOperation(category="context", key="note", value="In chat"),
                        ctx(WriterKind.REVIEWER), rows=[mem(5, "alice", ScopeType.AGENT, "ada", Category.CONTEXT,
                                                            "note", "In chat", promote=None)])
    assert isinstance(rendered, MemoryReplaced) and rendered.promote_target is PromoteTarget.MEMORY_MD
    [recategorised] = decide(ReplaceOperation(id=1, category="interest"))
    assert isinstance(recategorised, MemoryReplaced) and recategorised.category is Category.INTEREST


@pytest.mark.parametrize("confidence", [0, 0.0, 1, 1.0, 0.5])
def test_confidence_at_the_bounds_is_admitted(confidence: float) -> None:
    [added] = decide(AddOperation(category="goal", key="fresh", value="v", confidence=confidence))
    assert isinstance(added, MemoryAdded) and added.confidence == confidence
    assert isinstance(added.confidence, float)


@pytest.mark.parametrize("confidence", [-0.0001, 1.0001, -1, 2])
def test_confidence_just_outside_the_bounds_is_refused(confidence: float) -> None:
    assert refusal(decide(AddOperation(category="goal", key="fresh", value="v", confidence=confidence))) == \
        "invalid_confidence"


def test_replace_confidence_is_checked_too() -> None:
    assert refusal(decide(ReplaceOperation(id=1, confidence=1.5))) == "invalid_confidence"
    [zero] = decide(ReplaceOperation(id=1, confidence=0))
    assert isinstance(zero, MemoryReplaced) and zero.confidence == 0.0


def test_the_largest_row_id_is_usable_and_one_more_is_not() -> None:
    row = mem(LARGEST_ROW_ID, "alice", ScopeType.OWNER, "alice", Category.GOAL, "far", "v")
    [archived] = decide(ArchiveOperation(id=LARGEST_ROW_ID), rows=[row])
    assert isinstance(archived, MemoryArchived) and archived.memory_id == LARGEST_ROW_ID
    too_big = mem(LARGEST_ROW_ID + 1, "alice", ScopeType.OWNER, "alice", Category.GOAL, "far", "v")
    assert refusal(decide(ArchiveOperation(id=LARGEST_ROW_ID + 1), rows=[too_big])) == "not_visible"
    first = mem(1, "alice", ScopeType.OWNER, "alice", Category.GOAL, "far", "v")
    assert isinstance(decide(ArchiveOperation(id=1), rows=[first])[0], MemoryArchived)
    zero = mem(0, "alice", ScopeType.OWNER, "alice", Category.GOAL, "far", "v")
    assert refusal(decide(ArchiveOperation(id=0), rows=[zero])) == "not_visible"


def test_restore_at_the_id_bounds() -> None:
    operator = ctx(WriterKind.OPERATOR)
    archived = mem(LARGEST_ROW_ID, "alice", ScopeType.OWNER, "alice", Category.GOAL, "far", "v", archived=True)
    [restored] = POLICY.restore(LARGEST_ROW_ID, operator, FakeRows([archived]), AT)
    assert isinstance(restored, MemoryRestored) and restored.restored_by == "test"
    beyond = mem(LARGEST_ROW_ID + 1, "alice", ScopeType.OWNER, "alice", Category.GOAL, "far", "v", archived=True)
    assert refusal(POLICY.restore(LARGEST_ROW_ID + 1, operator, FakeRows([beyond]), AT)) == "unknown_memory"
    zero = mem(0, "alice", ScopeType.OWNER, "alice", Category.GOAL, "far", "v", archived=True)
    [refused] = POLICY.restore(0, operator, FakeRows([zero]), AT)
    assert isinstance(refused, OperationRefused) and refused.op == "restore" and refused.memory_id is None
    one = mem(1, "alice", ScopeType.OWNER, "alice", Category.GOAL, "far", "v", archived=True)
    assert isinstance(POLICY.restore(1, operator, FakeRows([one]), AT)[0], MemoryRestored)


def test_restore_names_the_writer_when_the_provenance_has_no_source() -> None:
    context = ctx(WriterKind.OPERATOR)
    context = type(context)(writer=context.writer, reader=context.reader,
                            provenance=Provenance(agent_id="ada", owner_id="alice", trust=Trust.OPERATOR))
    [restored] = POLICY.restore(7, context, FakeRows(ROWS), AT)
    assert isinstance(restored, MemoryRestored) and restored.restored_by == "operator"


def test_a_value_of_2000_characters_is_stored_and_2001_refused_or_cut() -> None:
    [whole] = decide(AddOperation(category="goal", key="k", value="w" * 2000), ctx(WriterKind.OPERATOR))
    assert isinstance(whole, MemoryAdded) and whole.value == "w" * 2000
    assert refusal(decide(AddOperation(category="goal", key="k", value="w" * 2001), ctx(WriterKind.OPERATOR))) == \
        "value_too_long"
    [cut] = decide(AddOperation(category="goal", key="k", value="w" * 2001), ctx(WriterKind.REVIEWER))
    assert isinstance(cut, MemoryAdded) and cut.value == "w" * 1999 + "…"


def test_values_are_cleaned_and_bounded_exactly() -> None:
    [added] = decide(AddOperation(category="goal", key="k1", value="  a\x00b\tc\nd\x0b\x7fe  "))
    assert isinstance(added, MemoryAdded) and added.value == "a b c\nd  e"
    policy = AdmissionPolicy(max_value_chars=10)
    lookup = FakeRows(ROWS)
    [at_limit] = policy.decide(AddOperation(category="goal", key="k2", value="x" * 10), ctx(WriterKind.OPERATOR),
                               lookup, AT)
    assert isinstance(at_limit, MemoryAdded) and at_limit.value == "x" * 10
    [over] = policy.decide(AddOperation(category="goal", key="k2", value="x" * 11), ctx(WriterKind.OPERATOR),
                           lookup, AT)
    assert isinstance(over, OperationRefused) and over.reason == "value_too_long"
    [cut] = policy.decide(AddOperation(category="goal", key="k2", value="x" * 11), ctx(WriterKind.REVIEWER),
                          lookup, AT)
    assert isinstance(cut, MemoryAdded) and cut.value == "x" * 9 + "…"
    assert refusal(decide(AddOperation(category="goal", key="k", value="a\ud800"))) == "invalid_value"


def test_archive_reason_is_trimmed_and_cut_to_500_characters() -> None:
    [archived] = decide(ArchiveOperation(id=1, reason="  " + "r" * 600 + "  "))
    assert isinstance(archived, MemoryArchived) and archived.reason == "r" * 500
    [plain] = decide(ArchiveOperation(id=1, reason=" old "))
    assert isinstance(plain, MemoryArchived) and plain.reason == "old"
    [odd] = decide(ArchiveOperation(id=1, reason=42))  # type: ignore[arg-type]
    assert isinstance(odd, MemoryArchived) and odd.reason == ""


def test_refusal_records_are_cut_and_keep_only_integer_ids() -> None:
    [refused] = decide(AddOperation(category="c" * 100, key="k" * 100, value="v"))
    assert isinstance(refused, OperationRefused)
    assert refused.category == "c" * 40 and refused.key == "k" * 80 and refused.memory_id is None
    assert refused.detail  # says why
    [by_bool] = decide(ArchiveOperation(id=True))
    assert isinstance(by_bool, OperationRefused) and by_bool.memory_id is None and by_bool.reason == "invalid_id"
    [by_id] = decide(ArchiveOperation(id=999))
    assert isinstance(by_id, OperationRefused) and by_id.memory_id == 999 and by_id.category == ""
    assert by_id.key == ""


def test_tool_and_job_rows_never_render_and_reviewer_and_operator_rows_do() -> None:
    for writer, target in ((WriterKind.REVIEWER, PromoteTarget.USER_MD), (WriterKind.OPERATOR, PromoteTarget.USER_MD),
                           (WriterKind.TOOL, None), (WriterKind.JOB, None)):
        [added] = decide(AddOperation(category="goal", key="fresh", value="v"), ctx(writer, job="nightly"
                                                                                    if writer is WriterKind.JOB
                                                                                    else None))
        assert isinstance(added, MemoryAdded) and added.promote_target is target, writer


def test_an_added_row_carries_the_reader_and_the_normalised_key() -> None:
    [added] = decide(AddOperation(category="interest", key="Board Games", value="Go", confidence=0.75))
    assert isinstance(added, MemoryAdded)
    assert (added.agent_id, added.owner_id, added.key, added.value, added.confidence) == (
        "ada", "alice", "board_games", "Go", 0.75)
    assert refusal(decide(AddOperation(category="goal", key="!!!", value="v"))) == "invalid_key"


def test_a_refusal_keeps_every_id_from_1_to_the_largest_row_id_and_drops_the_ids_beyond() -> None:
    def recorded(memory_id: int) -> int | None:
        [refused] = decide(ArchiveOperation(id=memory_id), rows=[])
        assert isinstance(refused, OperationRefused)
        return refused.memory_id

    assert recorded(1) == 1
    assert recorded(2) == 2
    assert recorded(LARGEST_ROW_ID) == LARGEST_ROW_ID
    assert recorded(LARGEST_ROW_ID + 1) is None
    assert recorded(0) is None
    assert recorded(-1) is None
