"""An operator's fact is never overwritten by a guest's statement older than it (admission,
memory_evolution): pure decisions over in-memory rows and events."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import attrs

from fermix_memory.domain.admission import AdmissionPolicy, WriteContext
from fermix_memory.domain.event_base import DomainEvent, Provenance
from fermix_memory.domain.memory import Memory
from fermix_memory.domain.memory_events import (
    MemoryAdded,
    MemoryArchived,
    MemoryReplaced,
    MemoryRestored,
    OperationRefused,
)
from fermix_memory.domain.memory_evolution import operator_set_rows, statement_time
from fermix_memory.domain.operations import AddOperation, ArchiveOperation, Operation, ReplaceOperation
from fermix_memory.domain.scopes import Reader, WriterKind
from fermix_memory.domain.values import Category, PromoteTarget, ScopeType, Trust

SET_AT = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
AT = SET_AT + timedelta(days=1)
BEFORE, AFTER = SET_AT - timedelta(days=30), SET_AT + timedelta(minutes=1)
ROW = Memory(id=7, agent_id="ada", owner_id="alice", scope_type=ScopeType.OWNER, scope_id="alice",
             category=Category.IDENTITY, key="home_city", value="Lives in Lyon",
             promote_target=PromoteTarget.USER_MD, created_at=BEFORE, updated_at=SET_AT)


class Rows:
    def by_id(self, memory_id: int) -> Memory | None:
        return ROW if memory_id == ROW.id else None

    def by_key(self, agent_id: str, owner_id: str, scope: object, key: str) -> Memory | None:
        return ROW if key == ROW.key else None


def ctx(trust: Trust, said_at: datetime | None, operator_set: dict[int, datetime] | None = None) -> WriteContext:
    return WriteContext(writer=WriterKind.REVIEWER, reader=Reader(agent_id="ada", owner_id="alice"),
                        provenance=Provenance(agent_id="ada", owner_id="alice", trust=trust, source_type="reviewer"),
                        said_at=said_at, operator_set={ROW.id: SET_AT} if operator_set is None else operator_set)


def decide(op: Operation, context: WriteContext) -> list[DomainEvent]:
    return AdmissionPolicy().decide(op, context, Rows(), AT)


OPS: list[Operation] = [
    AddOperation(category="identity", key="home_city", value="Lives in Paris"),
    ReplaceOperation(id=7, value="Lives in Paris"),
    ArchiveOperation(id=7, reason="moved"),
]


def test_a_guest_statement_older_than_the_operators_change_is_refused_and_recorded() -> None:
    for op in OPS:
        [event] = decide(op, ctx(Trust.GUEST, BEFORE))
        assert isinstance(event, OperationRefused), op
        assert (event.reason, event.op) == ("older_than_operator", op.op)
        assert "memory 7 was set by the operator" in event.detail


def test_a_newer_guest_statement_still_wins() -> None:
    [added, replaced, archived] = [decide(op, ctx(Trust.GUEST, AFTER)) for op in OPS]
    assert isinstance(added[0], MemoryReplaced) and isinstance(replaced[0], MemoryReplaced)
    assert isinstance(archived[0], MemoryArchived)


def test_a_statement_at_the_very_moment_of_the_change_is_not_older() -> None:
    assert isinstance(decide(OPS[1], ctx(Trust.GUEST, SET_AT))[0], MemoryReplaced)


def test_an_operator_or_a_write_from_no_message_or_a_row_a_guest_changed_last_is_not_held() -> None:
    assert isinstance(decide(OPS[1], ctx(Trust.OPERATOR, BEFORE))[0], MemoryReplaced)
    assert isinstance(decide(OPS[1], ctx(Trust.GUEST, None))[0], MemoryReplaced)
    assert isinstance(decide(OPS[1], ctx(Trust.GUEST, BEFORE, operator_set={}))[0], MemoryReplaced)


def test_a_restatement_of_the_operators_value_is_no_change_not_a_refusal() -> None:
    assert decide(ReplaceOperation(id=7, value="Lives in Lyon"), ctx(Trust.GUEST, BEFORE)) == []


def test_statement_time_is_the_newest_named_source_else_the_newest_shown() -> None:
    written = {1: BEFORE, 2: SET_AT, 3: AFTER}
    assert statement_time(ReplaceOperation(id=7, source_message_ids=(1, 2)), written) == SET_AT
    assert statement_time(ReplaceOperation(id=7, source_message_ids=(99,)), written) == AFTER
    assert statement_time(ReplaceOperation(id=7), written) == AFTER
    assert statement_time(ReplaceOperation(id=7), {}) is None


def prov(trust: Trust) -> Provenance:
    return Provenance(agent_id="ada", owner_id="alice", trust=trust)


def test_operator_set_rows_follows_whoever_changed_each_row_last() -> None:
    added = MemoryAdded(at=BEFORE, agent_id="ada", owner_id="alice", scope_type=ScopeType.OWNER, scope_id="alice",
                        category=Category.IDENTITY, key="home_city", value="Lives in Paris", confidence=1.0,
                        promote_target=PromoteTarget.USER_MD, provenance=prov(Trust.GUEST))
    replaced = MemoryReplaced(at=SET_AT, memory_id=7, category=Category.IDENTITY, key="home_city",
                              value="Lives in Lyon", confidence=1.0, promote_target=PromoteTarget.USER_MD,
                              previous_value="Lives in Paris", provenance=prov(Trust.OPERATOR))
    other = attrs.evolve(added, key="drink", provenance=prov(Trust.OPERATOR))
    assert operator_set_rows([(7, added)]) == {}
    assert operator_set_rows([(7, added), (8, replaced), (9, other)]) == {7: SET_AT, 9: BEFORE}
    archived = MemoryArchived(at=AFTER, memory_id=7, archived_by="reviewer", reason="", provenance=prov(Trust.GUEST))
    assert operator_set_rows([(7, added), (8, replaced), (10, archived)]) == {}
    restored = MemoryRestored(at=AT, memory_id=7, restored_by="cli", provenance=prov(Trust.OPERATOR))
    assert operator_set_rows([(7, added), (10, archived), (11, restored)]) == {7: AT}
