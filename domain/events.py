"""Domain events (R-EVENTS): every state change of fermix-memory, past tense, frozen.

Each class has a persisted ``kind`` tag and a ``schema`` version. Never rename a tag or change a
field's meaning: add a new schema version and an upcaster in the log adapter instead.
Events carry their own time (``at``) and, where a person or process caused them, a
:class:`Provenance` saying who, from where and why.

This module is the one place that knows every kind (:data:`ALL_EVENTS`, :data:`EVENTS_BY_KIND`)
and the namespace callers read events from (``events.MemoryAdded``). The classes live by
subject: the base classes in ``event_base``, conversation history in ``conversation_events``,
memory rows and erasure in ``memory_events``, reviews, jobs, resources and model calls in
``activity_events``.
"""

from __future__ import annotations

from fermix_memory.domain.activity_events import (
    JobRunRecorded,
    MemorySourceRegistered,
    ModelCallTraced,
    ResourceRevised,
    ResourceRolledBack,
    ReviewClaimed,
    ReviewCompleted,
    ReviewFailed,
    ReviewSkipped,
    ScheduledJobSaved,
)
from fermix_memory.domain.conversation_events import (
    CompactionFailed,
    ConversationWindowCleared,
    HistoryCompacted,
    MessageAppended,
    MessageRetracted,
)
from fermix_memory.domain.event_base import NO_OWNER_CONTENT, DomainEvent, Erasure, OwnerRef, Provenance, RowStatement
from fermix_memory.domain.memory_events import (
    ConversationForgotten,
    MemoryAdded,
    MemoryArchived,
    MemoryForgotten,
    MemoryReplaced,
    MemoryRestored,
    OperationRefused,
    OwnerForgotten,
    RedactedRevision,
)
from fermix_memory.domain.privacy_events import ErasureReceipted, ExportKeysDestroyed, RetentionRan, SealedPayloadsLost

__all__ = [
    "ALL_EVENTS", "ERASURE_RECORDS", "EVENTS_BY_KIND", "NO_OWNER_CONTENT", "REFERRING_KINDS", "CompactionFailed",
    "ConversationForgotten", "ConversationWindowCleared", "DomainEvent", "Erasure", "ErasureReceipted",
    "ExportKeysDestroyed", "HistoryCompacted",
    "JobRunRecorded", "MemoryAdded", "MemoryArchived", "MemoryForgotten", "MemoryReplaced", "MemoryRestored",
    "MemorySourceRegistered", "MessageAppended", "MessageRetracted", "ModelCallTraced", "OperationRefused",
    "OwnerForgotten", "OwnerRef", "Provenance", "RedactedRevision", "ResourceRevised", "ResourceRolledBack",
    "RetentionRan", "ReviewClaimed", "ReviewCompleted", "ReviewFailed", "ReviewSkipped", "RowStatement",
    "ScheduledJobSaved", "SealedPayloadsLost",
]  # fmt: skip

ALL_EVENTS: tuple[type[DomainEvent], ...] = (
    MessageAppended,
    MessageRetracted,
    ConversationWindowCleared,
    HistoryCompacted,
    CompactionFailed,
    MemoryAdded,
    MemoryReplaced,
    MemoryArchived,
    MemoryRestored,
    OperationRefused,
    ReviewClaimed,
    ReviewCompleted,
    ReviewFailed,
    ReviewSkipped,
    MemorySourceRegistered,
    ScheduledJobSaved,
    JobRunRecorded,
    ResourceRevised,
    ResourceRolledBack,
    ModelCallTraced,
    OwnerForgotten,
    MemoryForgotten,
    ConversationForgotten,
    ErasureReceipted,
    RetentionRan,
    ExportKeysDestroyed,
    SealedPayloadsLost,
)

# The records of an erasure: ``verify`` accepts a NULL payload only when one of them names it.
ERASURE_RECORDS: tuple[type[OwnerForgotten | MemoryForgotten | ConversationForgotten | SealedPayloadsLost], ...] = (
    OwnerForgotten, MemoryForgotten, ConversationForgotten, SealedPayloadsLost)

EVENTS_BY_KIND: dict[str, type[DomainEvent]] = {cls.kind: cls for cls in ALL_EVENTS}

# Kinds whose erasure must be decided on every event; any other event concerns an owner only
# if its payload names them.
REFERRING_KINDS: frozenset[str] = frozenset(cls.kind for cls in ALL_EVENTS if cls.refers_to_others)
