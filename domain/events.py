"""Domain events (R-EVENTS): every state change of fermix-memory, past tense, frozen.

Each class has a persisted ``kind`` tag and a ``schema`` version. Never rename a tag or change a
field's meaning: add a new schema version and an upcaster in the log adapter instead.
Events carry their own time (``at``) and, where a person or process caused them, a
:class:`Provenance` saying who, from where and why.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar

import attrs

from fermix_memory.domain.values import (
    Category,
    ConversationKey,
    PromoteTarget,
    Role,
    ScopeType,
    Trust,
)


@attrs.frozen(kw_only=True)
class Provenance:
    """Who caused a change, through what, and why."""

    agent_id: str
    owner_id: str
    trust: Trust = Trust.GUEST
    source_type: str = ""
    source_id: str = ""
    session_id: str = ""
    run_id: str = ""
    source_message_id: int | None = None
    reason: str = ""


@attrs.frozen(kw_only=True)
class DomainEvent:
    """Base of all events; ``at`` is when the change happened (passed in, never read here)."""

    kind: ClassVar[str] = ""
    schema: ClassVar[int] = 1
    at: datetime


# --- conversation history -------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class MessageAppended(DomainEvent):
    """A message joined a conversation. Its message id is this event's log position."""

    kind: ClassVar[str] = "message.appended"
    agent_id: str
    owner_id: str
    conversation: ConversationKey
    sender: str
    role: Role
    message_kind: str = "text"
    content: str
    metadata: dict[str, Any] = attrs.field(factory=dict)
    trust: Trust = Trust.GUEST
    created_at: datetime
    # Owners other than ``owner_id`` whose words this message quotes (a group chat's
    # compaction checkpoint summarises several people): their erasure must reach it too.
    quoted_owners: tuple[str, ...] = ()


@attrs.frozen(kw_only=True)
class ConversationWindowCleared(DomainEvent):
    """``/new`` or ``/clear``: later turns no longer see messages up to ``up_to_message_id``."""

    kind: ClassVar[str] = "conversation.window_cleared"
    agent_id: str
    conversation: ConversationKey
    up_to_message_id: int
    provenance: Provenance


@attrs.frozen(kw_only=True)
class HistoryCompacted(DomainEvent):
    """Messages up to ``up_to_message_id`` were replaced in the window by one checkpoint.

    The replaced messages stay in the log and in the ``messages`` table (for audit and
    recall); only the window moves. The checkpoint text is itself appended as a message.
    """

    kind: ClassVar[str] = "conversation.compacted"
    agent_id: str
    conversation: ConversationKey
    up_to_message_id: int
    checkpoint_message_id: int
    replaced_count: int
    tokens_before: int = 0
    tokens_after: int = 0
    provenance: Provenance


@attrs.frozen(kw_only=True)
class CompactionFailed(DomainEvent):
    kind: ClassVar[str] = "conversation.compaction_failed"
    agent_id: str
    conversation: ConversationKey
    error: str
    retry_after: datetime


# --- memory rows ----------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class MemoryAdded(DomainEvent):
    """A new memory row. Its memory id is this event's log position."""

    kind: ClassVar[str] = "memory.added"
    agent_id: str
    owner_id: str
    scope_type: ScopeType
    scope_id: str
    category: Category
    key: str
    value: str
    confidence: float = 1.0
    promote_target: PromoteTarget | None = None
    source_name: str = ""
    source_description: str = ""
    provenance: Provenance


@attrs.frozen(kw_only=True)
class MemoryReplaced(DomainEvent):
    """A row's statement changed (latest statement wins). Un-archives the row if archived."""

    kind: ClassVar[str] = "memory.replaced"
    memory_id: int
    category: Category
    key: str
    value: str
    confidence: float
    promote_target: PromoteTarget | None = None
    previous_value: str
    provenance: Provenance


@attrs.frozen(kw_only=True)
class MemoryArchived(DomainEvent):
    kind: ClassVar[str] = "memory.archived"
    memory_id: int
    archived_by: str
    reason: str
    provenance: Provenance


@attrs.frozen(kw_only=True)
class MemoryRestored(DomainEvent):
    kind: ClassVar[str] = "memory.restored"
    memory_id: int
    restored_by: str
    provenance: Provenance


@attrs.frozen(kw_only=True)
class OperationRefused(DomainEvent):
    """Admission refused a memory operation; nothing else was written for it."""

    kind: ClassVar[str] = "memory.operation_refused"
    op: str
    reason: str
    detail: str = ""
    category: str = ""
    key: str = ""
    memory_id: int | None = None
    provenance: Provenance


# --- background review ----------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class ReviewClaimed(DomainEvent):
    kind: ClassVar[str] = "review.claimed"
    agent_id: str
    owner_id: str
    conversation: ConversationKey
    claim_id: str
    holder: str
    expires_at: datetime
    reviewed_after_id: int = 0  # the review reads the user messages after this id


@attrs.frozen(kw_only=True)
class ReviewCompleted(DomainEvent):
    kind: ClassVar[str] = "review.completed"
    agent_id: str
    owner_id: str
    conversation: ConversationKey
    claim_id: str
    reviewed_up_to_message_id: int
    messages_reviewed: int
    applied: int
    refused: int
    nothing_to_save: bool = False


@attrs.frozen(kw_only=True)
class ReviewFailed(DomainEvent):
    kind: ClassVar[str] = "review.failed"
    agent_id: str
    owner_id: str
    conversation: ConversationKey
    claim_id: str
    error: str
    retry_after: datetime


@attrs.frozen(kw_only=True)
class ReviewSkipped(DomainEvent):
    kind: ClassVar[str] = "review.skipped"
    agent_id: str
    owner_id: str
    conversation: ConversationKey
    reason: str


# --- jobs, sources, resources ---------------------------------------------------------------


@attrs.frozen(kw_only=True)
class MemorySourceRegistered(DomainEvent):
    kind: ClassVar[str] = "memory_source.registered"
    source_id: str
    agent_id: str
    owner_id: str
    source_type: str
    name: str
    description: str = ""


@attrs.frozen(kw_only=True)
class ScheduledJobSaved(DomainEvent):
    kind: ClassVar[str] = "scheduled_job.saved"
    job_id: str
    agent_id: str
    owner_id: str
    name: str
    schedule: str
    prompt: str
    memory_source_id: str
    enabled: bool = True


@attrs.frozen(kw_only=True)
class JobRunRecorded(DomainEvent):
    kind: ClassVar[str] = "job_run.recorded"
    run_id: str
    job_id: str
    status: str
    started_at: datetime
    finished_at: datetime | None = None
    output: str = ""
    error: str = ""


@attrs.frozen(kw_only=True)
class ResourceRevised(DomainEvent):
    """A new revision of a versioned resource (``user_md``, ``memory_md``, …)."""

    kind: ClassVar[str] = "resource.revised"
    agent_id: str
    owner_id: str = ""
    name: str
    revision: int
    content: str
    content_sha256: str
    reason: str = "rebuild"


@attrs.frozen(kw_only=True)
class ResourceRolledBack(DomainEvent):
    kind: ClassVar[str] = "resource.rolled_back"
    agent_id: str
    owner_id: str = ""
    name: str
    to_revision: int
    new_revision: int
    content: str
    content_sha256: str
    provenance: Provenance


@attrs.frozen(kw_only=True)
class ModelCallTraced(DomainEvent):
    """One model call (reviewer, compactor): who asked, which provider, cost and outcome."""

    kind: ClassVar[str] = "model.call_traced"
    agent: str
    agent_id: str
    provider: str
    model: str
    latency_ms: float
    prompt_tokens: int = 0
    completion_tokens: int = 0
    outcome: str
    served_model: str = ""  # the model the server says answered; ``model`` is the configured one
    attempts: int = 1  # HTTP requests made (retries and parameter fallbacks included)
    notes: tuple[str, ...] = ()  # a parameter dropped as unsupported, a repair turn, ...


# --- erasure -------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class OwnerForgotten(DomainEvent):
    """Everything one owner left with one agent was erased: the payloads of their events are
    redacted (the chain keeps their digests) and their projection rows deleted. This record of
    the erasure carries no content: who, when, on whose request and how many events."""

    kind: ClassVar[str] = "owner.forgotten"
    agent_id: str
    owner_id: str
    erased_events: int
    provenance: Provenance


ALL_EVENTS: tuple[type[DomainEvent], ...] = (
    MessageAppended,
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
)

EVENTS_BY_KIND: dict[str, type[DomainEvent]] = {cls.kind: cls for cls in ALL_EVENTS}
