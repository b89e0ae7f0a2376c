"""Use case: the memory as it was at a moment (ADR-0033).

Every answer is a fold of the log, never of a projection: an owner's memory rows are the
domain's :func:`~fermix_memory.domain.memory_evolution.evolve_memory` over their memory stream,
a prompt file is :func:`fermix_memory.domain.resources.evolve` over its resource stream (the
rendering recorded then, the agent's standing rules of other owners included), and a
conversation's window is :func:`fermix_memory.domain.conversation_window.evolve` with the
conversation's messages. Each reads one stream through the store's port, so the cost follows
the size of that stream, not of the log.

What "at a moment" means: the events of the stream up to the first one recorded after it
(``event.at``), i.e. a prefix of the stream, which is the state a replay of the log stopped
just before that event leaves (the clock of one host only moves forward, so the prefix is every
event recorded at or before the moment). A moment before the first event is an empty memory.
Redacted events are skipped by every read of the store, so an erased value never comes back.

An erased row is not folded, at any moment: what says it stood then is read apart
(:func:`erased_as_of`, ADR-0083) from what the log keeps without its content: the row's own log
entry (redacted, its time kept), the erasure's record and its receipt.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator
from datetime import datetime
from typing import Protocol

from fermix_memory.application.composer import RevisionReader, StoredWindowReader
from fermix_memory.application.query_ports import ResourceRevision
from fermix_memory.application.store_ports import EventStore, RecordedEvent
from fermix_memory.application.streams import (
    RECEIPT_STREAM,
    conversation_stream,
    memory_stream,
    owner_stream,
    parse_owner_stream,
    resource_stream,
)
from fermix_memory.domain import conversation_window, resources
from fermix_memory.domain import events as ev
from fermix_memory.domain.erased_rows import ErasedRow, ErasedRowsFold, LogRow, erased_at
from fermix_memory.domain.errors import InvalidArgument
from fermix_memory.domain.memory import Memory
from fermix_memory.domain.memory_evolution import evolve_memory
from fermix_memory.domain.messages import Message
from fermix_memory.domain.values import ConversationKey, preview


def check_moment(value: object, now: datetime, what: str = "as_of") -> datetime:
    """The moment a caller asks about: a timezone-aware datetime, or an ISO 8601 text with an
    offset (``2026-11-02T10:00Z``). A naive time, a moment after ``now`` or another value is
    :class:`InvalidArgument`: the log cannot say what a later moment holds, and a time without a
    zone names no moment."""
    if isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value.strip())
        except ValueError:
            raise InvalidArgument(f"{what} {preview(value)} is not an ISO 8601 time such as 2026-11-02T10:00Z"
                                  ) from None
    elif isinstance(value, datetime):
        moment = value
    else:
        raise InvalidArgument(f"{what} must be a datetime or an ISO 8601 text, got {preview(value)}")
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise InvalidArgument(f"{what} {moment.isoformat()} has no time zone: give one, e.g. 2026-11-02T10:00Z")
    if moment > now:
        raise InvalidArgument(f"{what} {moment.isoformat()} is in the future (now is {now.isoformat()})")
    return moment


def _until(store: EventStore, stream: str, moment: datetime) -> Iterator[RecordedEvent]:
    """The stream's readable events up to the first one recorded after ``moment``."""
    for item in store.read_events(stream=stream):
        if item.event.at > moment:
            return
        yield item


def fold_memories(items: Iterator[RecordedEvent] | list[RecordedEvent]) -> dict[int, Memory]:
    """The memory rows a sequence of memory events leaves, by id (the domain's evolve)."""
    rows: dict[int, Memory] = {}
    for item in items:
        e = item.event
        if isinstance(e, ev.MemoryAdded):
            target = item.position
        elif isinstance(e, ev.MemoryReplaced | ev.MemoryArchived | ev.MemoryRestored):
            target = e.memory_id
        else:
            continue
        row = evolve_memory(rows.get(target), item.position, e)
        if row is not None:
            rows[target] = row
    return rows


def memories_as_of(store: EventStore, agent_id: str, owner_id: str, moment: datetime, *,
                   include_archived: bool = True) -> list[Memory]:
    """One owner's memory rows with one agent as they were at ``moment``, by id."""
    rows = fold_memories(_until(store, memory_stream(agent_id, owner_id), moment))
    return [r for _, r in sorted(rows.items()) if include_archived or r.archived_at is None]


def _pairs(store: EventStore, agent_id: str | None, owner_id: str | None) -> list[tuple[str, str]]:
    """The (agent, owner) pairs with a memory stream (of one agent / owner when given): found on
    the log's stream index, not by reading the log."""
    if agent_id is not None and owner_id is not None:
        return [(agent_id, owner_id)]
    prefix = "memory/" if agent_id is None else memory_stream(agent_id, "")
    return [p for p in map(parse_owner_stream, store.last_positions(prefix)) if owner_id is None or p[1] == owner_id]


def all_memories_as_of(store: EventStore, moment: datetime, *, agent_id: str | None = None,
                       owner_id: str | None = None, include_archived: bool = True) -> list[Memory]:
    """Every row (optionally of one agent / owner) as it was at ``moment``, by id: an operator's
    view. One owner of one agent is one stream; otherwise each owner's stream is folded in turn."""
    pairs = _pairs(store, agent_id, owner_id)
    found = [row for a, o in pairs for row in memories_as_of(store, a, o, moment, include_archived=include_archived)]
    return sorted(found, key=lambda r: r.id)


class ErasureLog(Protocol):
    """What the log keeps of erased rows, beside the store's reads of readable events."""

    def stream_rows(self, stream: str) -> list[LogRow]:
        """Every entry of ``stream`` in version order, redacted ones included (no payload)."""
        ...

    def events_at(self, positions: Collection[int]) -> list[RecordedEvent]:
        """The readable events at ``positions``, in log order."""
        ...

    def records_after(self, position: int, kinds: Collection[str]) -> Iterator[RecordedEvent]:
        """Readable events of ``kinds`` after ``position``, in log order."""
        ...


_RECORD_KINDS = frozenset(cls.kind for cls in ev.ERASURE_RECORDS)


def erased_rows(store: EventStore, log: ErasureLog, agent_id: str, owner_id: str) -> list[ErasedRow]:
    """Every row of one owner with one agent that an erasure took, by id, with when and by what.

    The memory stream's entries name the rows; their records are found on the memory stream
    (one row's erasure), the owner's stream (the owner's), or through the receipts naming the
    rows (a conversation's, recorded on its own stream); a row erased before receipts were
    signed is looked for among the erasure records after it (a walk of the log's end)."""
    fold = ErasedRowsFold(agent_id, owner_id)
    entries = log.stream_rows(memory_stream(agent_id, owner_id))
    for row in entries:
        fold.add_row(row)
    if not fold.candidates():
        return []
    # The stream's records only, by position: its other events are not decoded.
    for item in log.events_at([e.position for e in entries if e.kind in _RECORD_KINDS and not e.redacted]):
        fold.add_record(item.position, item.event)
    for item in store.read_events(stream=owner_stream(agent_id, owner_id)):
        fold.add_record(item.position, item.event)
    for item in store.read_events(stream=RECEIPT_STREAM):
        if isinstance(item.event, ev.ErasureReceipted):
            fold.add_receipt(item.position, item.event)
    missing = fold.unexplained()
    if missing:
        records = [r for receipt in fold.receipts_naming(missing) for r in fold.receipt_records(receipt)]
        for item in log.events_at(records):
            fold.add_record(item.position, item.event)
        missing = fold.unexplained()
    if missing:
        for item in log.records_after(missing[0], _RECORD_KINDS):
            fold.add_record(item.position, item.event)
    return fold.rows()


def erased_as_of(store: EventStore, log: ErasureLog, moment: datetime, *, agent_id: str | None = None,
                 owner_id: str | None = None) -> list[ErasedRow]:
    """The rows (optionally of one agent / owner) that stood at ``moment`` and were erased after
    it, by id: their ids, times and erasures, never their content. At or after its erasure a row
    is in neither this answer nor :func:`all_memories_as_of`'s."""
    pairs = _pairs(store, agent_id, owner_id)
    found = [row for a, o in pairs for row in erased_at(erased_rows(store, log, a, o), moment)]
    return sorted(found, key=lambda r: r.memory_id)


def revision_as_of(store: EventStore, agent_id: str, owner_id: str, name: str,
                   moment: datetime) -> ResourceRevision | None:
    """The revision of a prompt file that was current at ``moment`` (``None``: none was yet)."""
    state, last = resources.NEVER_RECORDED, None
    for item in _until(store, resource_stream(agent_id, owner_id, name), moment):
        e = item.event
        if isinstance(e, ev.ResourceRevised | ev.ResourceRolledBack):
            state, last = resources.evolve(state, e), e
    if last is None:
        return None
    return ResourceRevision(agent_id=agent_id, owner_id=owner_id, name=name, revision=state.revision,
                            content=state.content, content_sha256=state.content_sha256,
                            reason=resources.revision_reason(last), created_at=last.at)


def window_as_of(store: EventStore, agent_id: str, conversation: ConversationKey, moment: datetime,
                 limit: int | None) -> list[Message]:
    """A conversation's window as it was at ``moment``: its messages after the last clear or
    compaction then, not retracted, the checkpoint first, oldest first (the last ``limit``)."""
    window = conversation_window.ConversationWindow()
    live: dict[int, Message] = {}
    for item in _until(store, conversation_stream(agent_id, conversation), moment):
        e = item.event
        if isinstance(e, ev.MessageAppended):
            live[item.position] = e.message(item.position)
        elif isinstance(e, ev.MessageRetracted):
            live.pop(e.message_id, None)
        else:
            window = conversation_window.evolve(window, e)
    kept = sorted((m for m in live.values() if m.id > window.window_start_id), key=lambda m: (m.created_at, m.id))
    if limit is not None:
        kept = kept[len(kept) - limit:] if limit else []
    checkpoint = [m for m in kept if m.id == window.checkpoint_message_id]
    return checkpoint + [m for m in kept if m.id != window.checkpoint_message_id]


def prompt_readers_as_of(store: EventStore, moment: datetime,
                         limit: int | None) -> tuple[RevisionReader, StoredWindowReader]:
    """What composing a prompt reads, as it was at ``moment``: each prompt file's revision then
    and each conversation's window then (its last ``limit`` messages), folded from the log."""

    def revision(agent_id: str, owner_id: str, name: str) -> ResourceRevision | None:
        return revision_as_of(store, agent_id, owner_id, name, moment)

    def window(agent_id: str, conversation: ConversationKey) -> list[Message]:
        return window_as_of(store, agent_id, conversation, moment, limit)

    return revision, window
