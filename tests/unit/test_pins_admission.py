"""Pins for domain/admission.py: what admission LETS THROUGH, not only what it refuses, and its
exact limits (confidence 0 and 1, the largest row id, the 2,000-character value)."""

from __future__ import annotations

import pytest

from fermix_memory.domain.admission import AdmissionPolicy
from fermix_memory.domain.event_base import Provenance
from fermix_memory.domain.memory_events import (
    MemoryAdded,
    MemoryArchived,
    MemoryReplaced,
    MemoryRestored,
    OperationRefused,
)
from fermix_memory.domain.operations import AddOperation, ArchiveOperation, ReplaceOperation
from fermix_memory.domain.scopes import WriterKind
from fermix_memory.domain.values import Category, PromoteTarget, ScopeType, Trust
from tests.unit.test_domain_admission import (
    AT,
    CONV,
    OTHER_CONV,
    POLICY,
    ROWS,
    FakeRows,
    ctx,
    decide,
    mem,
    refusal,
)

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
