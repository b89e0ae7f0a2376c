"""Use case: answer "why does this fact say this?" — the events and source messages behind a row."""

from __future__ import annotations

from typing import Any, Protocol

from fermix_memory.application.errors import NotFound
from fermix_memory.application.store_ports import EventStore, RecordedEvent
from fermix_memory.application.streams import memory_stream, review_stream
from fermix_memory.domain import events as ev
from fermix_memory.domain.memory import Memory
from fermix_memory.domain.messages import Message
from fermix_memory.domain.values import ConversationKey

MAX_SOURCE_MESSAGES = 100


class ExplainQueries(Protocol):
    def memory(self, memory_id: int) -> Memory | None: ...

    def message(self, message_id: int) -> Message | None: ...

    def user_messages_after(self, agent_id: str, owner_id: str, conversation: ConversationKey, after_id: int,
                            limit: int) -> list[Message]: ...


def _concerns(item: RecordedEvent, memory_id: int) -> bool:
    if isinstance(item.event, ev.MemoryAdded):
        return item.position == memory_id
    return getattr(item.event, "memory_id", None) == memory_id


def _message_entry(message: Message) -> dict[str, Any]:
    return {"id": message.id, "conversation": str(message.conversation), "sender": message.sender,
            "role": message.role.value, "trust": message.trust.value, "at": message.created_at.isoformat(),
            "content": message.content}


def _source_messages(store: EventStore, queries: ExplainQueries, row: Memory,
                     provenance: ev.Provenance) -> list[dict[str, Any]]:
    """The messages a change came from: the ones its provenance names exactly, else (a change
    recorded without them) its one source message, or for a review every user message that
    review read."""
    if provenance.source_message_ids is not None:
        named = (queries.message(i) for i in provenance.source_message_ids[:MAX_SOURCE_MESSAGES])
        return [_message_entry(m) for m in named
                if m is not None and (m.agent_id, m.owner_id) == (row.agent_id, row.owner_id)]
    if provenance.source_message_id is None:
        return []
    last = queries.message(provenance.source_message_id)
    if last is None:
        return []
    if provenance.source_type != "reviewer" or not provenance.run_id:
        return [_message_entry(last)]
    after = None
    for item in store.read_events(stream=review_stream(row.agent_id, row.owner_id, last.conversation)):
        if isinstance(item.event, ev.ReviewClaimed) and item.event.claim_id == provenance.run_id:
            after = item.event.reviewed_after_id
    if after is None:
        return [_message_entry(last)]
    read = queries.user_messages_after(row.agent_id, row.owner_id, last.conversation, after, MAX_SOURCE_MESSAGES)
    return [_message_entry(m) for m in read if m.id <= last.id]


def explain_memory(store: EventStore, queries: ExplainQueries, memory_id: int) -> dict[str, Any]:
    """The row, every event that shaped it (oldest first), who caused each and the messages
    each came from."""
    row = queries.memory(memory_id)
    if row is None:
        raise NotFound(f"no memory row {memory_id}")
    trail = []
    for item in store.read_events(stream=memory_stream(row.agent_id, row.owner_id)):
        if not _concerns(item, memory_id):
            continue
        e = item.event
        entry: dict[str, Any] = {"position": item.position, "kind": e.kind, "at": e.at.isoformat()}
        for name in ("value", "previous_value", "reason", "category", "key"):
            if hasattr(e, name):
                entry[name] = getattr(e, name)
        if isinstance(e, ev.MemoryAdded | ev.MemoryReplaced) and e.expires_at is not None:
            entry["expires_at"] = e.expires_at.isoformat()  # the row's expiry after the change (ADR-0082)
        provenance = getattr(e, "provenance", None)
        if isinstance(provenance, ev.Provenance):
            entry["by"] = {
                "trust": provenance.trust.value, "source_type": provenance.source_type,
                "source_id": provenance.source_id, "session_id": provenance.session_id,
                "run_id": provenance.run_id, "source_message_id": provenance.source_message_id,
                "reason": provenance.reason,
            }
            if provenance.source_message_ids is not None:
                entry["by"]["source_message_ids"] = list(provenance.source_message_ids)
            if provenance.dropped_source_message_ids:
                # How many, not which: a dropped id may name another owner's message.
                entry["by"]["dropped_source_messages"] = len(provenance.dropped_source_message_ids)
            entry["source_messages"] = _source_messages(store, queries, row, provenance)
        trail.append(entry)
    return {"memory": row, "events": trail}
