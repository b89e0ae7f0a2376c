"""Use case: answer "why does this fact say this?" — the events and source messages behind a row."""

from __future__ import annotations

from typing import Any

from fermix_memory.application.errors import NotFound
from fermix_memory.application.ports import EventStore, MemoryQueries, RecordedEvent
from fermix_memory.application.streams import memory_stream
from fermix_memory.domain import events as ev


def _concerns(item: RecordedEvent, memory_id: int) -> bool:
    if isinstance(item.event, ev.MemoryAdded):
        return item.position == memory_id
    return getattr(item.event, "memory_id", None) == memory_id


def explain_memory(store: EventStore, queries: MemoryQueries, memory_id: int) -> dict[str, Any]:
    """The row, every event that shaped it (oldest first) and the messages they cite."""
    row = queries.memory(memory_id)
    if row is None:
        raise NotFound(f"no memory row {memory_id}")
    trail = []
    for item in store.read_events(stream=memory_stream(row.agent_id, row.owner_id)):
        if not _concerns(item, memory_id):
            continue
        e = item.event
        provenance = getattr(e, "provenance", None)
        entry: dict[str, Any] = {"position": item.position, "kind": e.kind, "at": e.at.isoformat()}
        for name in ("value", "previous_value", "reason", "category", "key"):
            if hasattr(e, name):
                entry[name] = getattr(e, name)
        if provenance is not None:
            entry["by"] = {
                "trust": provenance.trust.value, "source_type": provenance.source_type,
                "source_id": provenance.source_id, "session_id": provenance.session_id,
                "run_id": provenance.run_id, "source_message_id": provenance.source_message_id,
                "reason": provenance.reason,
            }
        trail.append(entry)
    return {"memory": row, "events": trail}
