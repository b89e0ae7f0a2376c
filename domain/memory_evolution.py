"""Evolve: the memory row an event leaves behind (pure). The SQL projection of ``memories`` is
checked against it by tests/integration/test_projections_follow_the_domain.py."""

from __future__ import annotations

import attrs

from fermix_memory.domain import events as ev
from fermix_memory.domain.memory import Memory


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
            created_at=event.at, updated_at=event.at,
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
        )
    if isinstance(event, ev.MemoryArchived):
        return attrs.evolve(row, archived_at=event.at, archived_by=event.archived_by, archive_reason=event.reason,
                            updated_at=event.at)
    if isinstance(event, ev.MemoryRestored):
        return attrs.evolve(row, archived_at=None, archived_by=None, archive_reason=None, updated_at=event.at)
    return row
