"""Evolve: the memory row an event leaves behind (pure). The SQL projection of ``memories`` is
checked against it by tests/integration/test_projections_follow_the_domain.py."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime

import attrs

from fermix_memory.domain import events as ev
from fermix_memory.domain.memory import Memory
from fermix_memory.domain.operations import Operation
from fermix_memory.domain.values import Trust


def evolve_memory(row: Memory | None, position: int, event: ev.DomainEvent) -> Memory | None:
    """The row after ``event`` (recorded at ``position``); ``row`` is the row it names, if any.

    Returns ``row`` unchanged for events that do not concern memory rows.
    """
    if isinstance(event, ev.MemoryAdded):
        p = event.provenance
        return Memory(
            id=position, agent_id=event.agent_id, owner_id=event.owner_id, scope_type=event.scope_type,
            scope_id=event.scope_id, category=event.category, key=event.key, value=event.value,
            confidence=event.confidence, promote_target=event.promote_target, source_id=p.source_id,
            source_type=p.source_type, source_name=event.source_name, source_description=event.source_description,
            session_id=p.session_id, run_id=p.run_id, source_message_id=p.source_message_id,
            created_at=event.at, updated_at=event.at, expires_at=event.expires_at,
        )
    if row is None:
        return None
    if isinstance(event, ev.MemoryReplaced):
        p = event.provenance
        return attrs.evolve(
            row, category=event.category, key=event.key, value=event.value, confidence=event.confidence,
            promote_target=event.promote_target, source_id=p.source_id, source_type=p.source_type,
            session_id=p.session_id, run_id=p.run_id, source_message_id=p.source_message_id,
            archived_at=None, archived_by=None, archive_reason=None, updated_at=event.at,
            expires_at=event.expires_at,
        )
    if isinstance(event, ev.MemoryArchived):
        return attrs.evolve(row, archived_at=event.at, archived_by=event.archived_by, archive_reason=event.reason,
                            updated_at=event.at)
    if isinstance(event, ev.MemoryRestored):
        return attrs.evolve(row, archived_at=None, archived_by=None, archive_reason=None, updated_at=event.at)
    return row


def operator_set_rows(recorded: Iterable[tuple[int, ev.DomainEvent]]) -> dict[int, datetime]:
    """The rows whose latest change (add, replace, archive, restore) an operator made, and when
    (the row's ``updated_at``), folded from ``(position, event)`` pairs in log order."""
    rows: dict[int, datetime] = {}
    for position, event in recorded:
        if isinstance(event, ev.MemoryAdded):
            row_id = position
        elif isinstance(event, ev.MemoryReplaced | ev.MemoryArchived | ev.MemoryRestored):
            row_id = event.memory_id
        else:
            continue
        if event.provenance.trust is Trust.OPERATOR:
            rows[row_id] = event.at
        else:
            rows.pop(row_id, None)
    return rows


def statement_time(op: Operation, written: Mapping[int, datetime]) -> datetime | None:
    """When the newest message ``op`` came from was written: among its ``source_message_ids``
    that ``written`` (message id → creation time, the messages its writer was shown) knows,
    else among all of them; ``None`` when ``written`` is empty."""
    named = [written[i] for i in op.source_message_ids if i in written]
    times = named or list(written.values())
    return max(times) if times else None


def older_statement(row_id: int, trust: Trust, said_at: datetime | None, operator_set: Mapping[int, datetime]) -> str:
    """Why a change of row ``row_id`` would put back what an operator corrected (``""``: it
    would not). An operator's fact is never overwritten by a guest's statement older than it: a
    history imported or replayed after the operator set the row would otherwise undo the
    operator. A guest's change of a row an operator changed last (``operator_set``:
    :func:`operator_set_rows`) is refused when every message it came from was written
    (``said_at``: the newest of them, :func:`statement_time`) before that change; a newer
    statement still wins, and a change that came from no message is not held."""
    set_at = operator_set.get(row_id)
    if trust is Trust.OPERATOR or said_at is None or set_at is None or said_at >= set_at:
        return ""
    return (f"memory {row_id} was set by the operator at {set_at.isoformat()}, after the messages this came from"
            f" (the newest written at {said_at.isoformat()})")
