"""What a record holds when its writer leaves an optional field out, written out as literals (a
changed default changes stored events): every default of the provenance, of a job run and of the
event fields the specification of the log names, of memory rows, operations and messages; and
each event's schema version (a stored event decoded without a field gets its default)."""

from __future__ import annotations

from datetime import UTC, datetime

import attrs
import pytest

from fermix_memory.domain import events as ev
from fermix_memory.domain.memory import Memory
from fermix_memory.domain.messages import Message
from fermix_memory.domain.operations import AddOperation, ArchiveOperation, ReplaceOperation
from fermix_memory.domain.values import Category, ConversationKey, Role, ScopeType, Trust

AT = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)


def test_a_provenance_names_only_its_agent_and_owner_by_default() -> None:
    who = ev.Provenance(agent_id="ada", owner_id="alice")
    assert attrs.asdict(who, recurse=False) == {
        "agent_id": "ada", "owner_id": "alice", "trust": Trust.GUEST, "source_type": "", "source_id": "",
        "session_id": "", "run_id": "", "source_message_id": None, "reason": "", "source_message_ids": None,
        "dropped_source_message_ids": ()}
    assert who.source_id == ""


def test_a_job_run_has_no_output_no_error_and_no_end_by_default() -> None:
    run = ev.JobRunRecorded(at=AT, run_id="r1", job_id="j1", status="running", started_at=AT)
    assert (run.output, run.error, run.finished_at) == ("", "", None)
    assert run.output == ""


KEY = ConversationKey("tg", "1")

# (event class, field) -> the default written in the specification of the log.
DEFAULTS = {
    (ev.HistoryCompacted, "tokens_before"): 0,
    (ev.HistoryCompacted, "tokens_after"): 0,
    (ev.MemoryAdded, "confidence"): 1.0,
    (ev.MemoryAdded, "promote_target"): None,
    (ev.ReviewClaimed, "reviewed_after_id"): 0,
    (ev.ReviewCompleted, "nothing_to_save"): False,
    (ev.ScheduledJobSaved, "enabled"): True,
    (ev.ModelCallTraced, "prompt_tokens"): 0,
    (ev.ModelCallTraced, "completion_tokens"): 0,
    (ev.ModelCallTraced, "attempts"): 1,
}


@pytest.mark.parametrize(("cls", "field"), list(DEFAULTS))
def test_event_field_defaults(cls: type[ev.DomainEvent], field: str) -> None:
    assert attrs.fields_dict(cls)[field].default == DEFAULTS[(cls, field)]
    assert type(attrs.fields_dict(cls)[field].default) is type(DEFAULTS[(cls, field)])


SCHEMA_2 = (ev.OwnerForgotten, ev.MemoryArchived)
SCHEMA_3 = (ev.MemoryAdded, ev.MemoryReplaced)  # 3: a row's own expiry (ADR-0082)


def test_every_event_is_at_schema_1_with_a_tag_but_owner_forgotten_and_row_changes_at_2() -> None:
    classes = [c for c in vars(ev).values() if isinstance(c, type) and issubclass(c, ev.DomainEvent)
               and c is not ev.DomainEvent]
    assert len(classes) >= 20
    for cls in classes:
        assert cls.schema == (3 if cls in SCHEMA_3 else 2 if cls in SCHEMA_2 else 1), cls
        assert cls.kind, cls


def test_memory_row_defaults_and_archived_flag() -> None:
    row = Memory(id=1, agent_id="a", owner_id="o", scope_type=ScopeType.OWNER, scope_id="o",
                 category=Category.GOAL, key="k", value="v", created_at=AT, updated_at=AT)
    assert row.confidence == 1.0 and row.promote_target is None and not row.archived
    assert attrs.evolve(row, archived_at=AT).archived


def test_operation_defaults() -> None:
    assert AddOperation(category="goal", key="k", value="v").confidence == 1.0
    assert ReplaceOperation(id=1) == ReplaceOperation(id=1, value=None, category=None, key=None, confidence=None)
    assert ArchiveOperation(id=1).reason == ""
    assert (AddOperation.op, ReplaceOperation.op, ArchiveOperation.op) == ("add", "replace", "archive")


def test_a_message_defaults_to_guest_trust_and_empty_metadata() -> None:
    message = Message(id=1, agent_id="a", owner_id="o", conversation=KEY, sender="s", role=Role.USER, kind="text",
                      content="c", created_at=AT)
    assert message.trust is Trust.GUEST and message.metadata == {}
