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


OwnerRef = tuple[str, str]  # (agent_id, owner_id)


@attrs.frozen(kw_only=True)
class Erasure:
    """Whose content an event carries: what forgetting an owner must redact (ADR-0010).

    ``owners``: (agent, owner) pairs whose words or data the event carries. ``memory_row`` /
    ``job``: it also carries content of the owner of that memory row / scheduled job.
    ``conversation``: it carries text of the conversation (model output quoting anyone), so it
    belongs to every owner who takes part in it. The ``creates_*`` / ``takes_part`` facts let
    those references be resolved from the log alone: this event creates memory row
    <its position> / job ``creates_job`` for ``owners[0]``; its owners take part in
    ``conversation``.
    """

    owners: tuple[OwnerRef, ...] = ()
    memory_row: int | None = None
    job: str = ""
    conversation: tuple[str, ConversationKey] | None = None
    creates_row: bool = False
    creates_job: str = ""
    takes_part: bool = False


NO_OWNER_CONTENT = Erasure()


@attrs.frozen(kw_only=True)
class DomainEvent:
    """Base of all events; ``at`` is when the change happened (passed in, never read here).

    Every event class declares :meth:`erasure` itself (no default: a new kind must decide
    whose content it carries)."""

    kind: ClassVar[str] = ""
    schema: ClassVar[int] = 1
    # True when ``erasure()`` can name an owner's content by reference (a memory row, a job, a
    # conversation) instead of by the owner ids in the event itself. Declared by every class.
    refers_to_others: ClassVar[bool]
    at: datetime

    def erasure(self) -> Erasure:
        raise NotImplementedError(f"{type(self).__name__} does not declare whose content it carries")


# --- conversation history -------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class MessageAppended(DomainEvent):
    """A message joined a conversation. Its message id is this event's log position."""

    kind: ClassVar[str] = "message.appended"
    refers_to_others: ClassVar[bool] = False
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

    def erasure(self) -> Erasure:
        owners = tuple((self.agent_id, o) for o in (self.owner_id, *self.quoted_owners))
        return Erasure(owners=owners, conversation=(self.agent_id, self.conversation), takes_part=True)


@attrs.frozen(kw_only=True)
class ConversationWindowCleared(DomainEvent):
    """``/new`` or ``/clear``: later turns no longer see messages up to ``up_to_message_id``."""

    kind: ClassVar[str] = "conversation.window_cleared"
    refers_to_others: ClassVar[bool] = False
    agent_id: str
    conversation: ConversationKey
    up_to_message_id: int
    provenance: Provenance

    def erasure(self) -> Erasure:
        return NO_OWNER_CONTENT  # ids and times only; other participants' windows depend on it


@attrs.frozen(kw_only=True)
class HistoryCompacted(DomainEvent):
    """Messages up to ``up_to_message_id`` were replaced in the window by one checkpoint.

    The replaced messages stay in the log and in the ``messages`` table (for audit and
    recall); only the window moves. The checkpoint text is itself appended as a message.
    """

    kind: ClassVar[str] = "conversation.compacted"
    refers_to_others: ClassVar[bool] = False
    agent_id: str
    conversation: ConversationKey
    up_to_message_id: int
    checkpoint_message_id: int
    replaced_count: int
    tokens_before: int = 0
    tokens_after: int = 0
    provenance: Provenance

    def erasure(self) -> Erasure:
        return NO_OWNER_CONTENT  # ids, counts and times; the checkpoint text is its own message


@attrs.frozen(kw_only=True)
class CompactionFailed(DomainEvent):
    kind: ClassVar[str] = "conversation.compaction_failed"
    refers_to_others: ClassVar[bool] = True
    agent_id: str
    conversation: ConversationKey
    error: str
    retry_after: datetime

    def erasure(self) -> Erasure:
        return Erasure(conversation=(self.agent_id, self.conversation))  # ``error`` may quote the model


# --- memory rows ----------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class MemoryAdded(DomainEvent):
    """A new memory row. Its memory id is this event's log position."""

    kind: ClassVar[str] = "memory.added"
    refers_to_others: ClassVar[bool] = False
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

    def erasure(self) -> Erasure:
        return Erasure(owners=((self.agent_id, self.owner_id),), creates_row=True)


@attrs.frozen(kw_only=True)
class MemoryReplaced(DomainEvent):
    """A row's statement changed (latest statement wins). Un-archives the row if archived."""

    kind: ClassVar[str] = "memory.replaced"
    refers_to_others: ClassVar[bool] = True
    memory_id: int
    category: Category
    key: str
    value: str
    confidence: float
    promote_target: PromoteTarget | None = None
    previous_value: str
    provenance: Provenance

    def erasure(self) -> Erasure:
        return Erasure(memory_row=self.memory_id)


@attrs.frozen(kw_only=True)
class MemoryArchived(DomainEvent):
    kind: ClassVar[str] = "memory.archived"
    refers_to_others: ClassVar[bool] = True
    memory_id: int
    archived_by: str
    reason: str
    provenance: Provenance

    def erasure(self) -> Erasure:
        return Erasure(memory_row=self.memory_id)


@attrs.frozen(kw_only=True)
class MemoryRestored(DomainEvent):
    kind: ClassVar[str] = "memory.restored"
    refers_to_others: ClassVar[bool] = True
    memory_id: int
    restored_by: str
    provenance: Provenance

    def erasure(self) -> Erasure:
        return Erasure(memory_row=self.memory_id)


@attrs.frozen(kw_only=True)
class OperationRefused(DomainEvent):
    """Admission refused a memory operation; nothing else was written for it."""

    kind: ClassVar[str] = "memory.operation_refused"
    refers_to_others: ClassVar[bool] = True
    op: str
    reason: str
    detail: str = ""
    category: str = ""
    key: str = ""
    memory_id: int | None = None
    provenance: Provenance

    def erasure(self) -> Erasure:
        p = self.provenance
        return Erasure(owners=((p.agent_id, p.owner_id),), memory_row=self.memory_id)


# --- background review ----------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class ReviewClaimed(DomainEvent):
    kind: ClassVar[str] = "review.claimed"
    refers_to_others: ClassVar[bool] = False
    agent_id: str
    owner_id: str
    conversation: ConversationKey
    claim_id: str
    holder: str
    expires_at: datetime
    reviewed_after_id: int = 0  # the review reads the user messages after this id

    def erasure(self) -> Erasure:
        return Erasure(owners=((self.agent_id, self.owner_id),))


@attrs.frozen(kw_only=True)
class ReviewCompleted(DomainEvent):
    kind: ClassVar[str] = "review.completed"
    refers_to_others: ClassVar[bool] = False
    agent_id: str
    owner_id: str
    conversation: ConversationKey
    claim_id: str
    reviewed_up_to_message_id: int
    messages_reviewed: int
    applied: int
    refused: int
    nothing_to_save: bool = False

    def erasure(self) -> Erasure:
        return Erasure(owners=((self.agent_id, self.owner_id),))


@attrs.frozen(kw_only=True)
class ReviewFailed(DomainEvent):
    kind: ClassVar[str] = "review.failed"
    refers_to_others: ClassVar[bool] = False
    agent_id: str
    owner_id: str
    conversation: ConversationKey
    claim_id: str
    error: str
    retry_after: datetime

    def erasure(self) -> Erasure:
        return Erasure(owners=((self.agent_id, self.owner_id),))


@attrs.frozen(kw_only=True)
class ReviewSkipped(DomainEvent):
    kind: ClassVar[str] = "review.skipped"
    refers_to_others: ClassVar[bool] = False
    agent_id: str
    owner_id: str
    conversation: ConversationKey
    reason: str

    def erasure(self) -> Erasure:
        return Erasure(owners=((self.agent_id, self.owner_id),))


# --- jobs, sources, resources ---------------------------------------------------------------


@attrs.frozen(kw_only=True)
class MemorySourceRegistered(DomainEvent):
    kind: ClassVar[str] = "memory_source.registered"
    refers_to_others: ClassVar[bool] = False
    source_id: str
    agent_id: str
    owner_id: str
    source_type: str
    name: str
    description: str = ""

    def erasure(self) -> Erasure:
        return Erasure(owners=((self.agent_id, self.owner_id),))


@attrs.frozen(kw_only=True)
class ScheduledJobSaved(DomainEvent):
    kind: ClassVar[str] = "scheduled_job.saved"
    refers_to_others: ClassVar[bool] = False
    job_id: str
    agent_id: str
    owner_id: str
    name: str
    schedule: str
    prompt: str
    memory_source_id: str
    enabled: bool = True

    def erasure(self) -> Erasure:
        return Erasure(owners=((self.agent_id, self.owner_id),), creates_job=self.job_id)


@attrs.frozen(kw_only=True)
class JobRunRecorded(DomainEvent):
    kind: ClassVar[str] = "job_run.recorded"
    refers_to_others: ClassVar[bool] = True
    run_id: str
    job_id: str
    status: str
    started_at: datetime
    finished_at: datetime | None = None
    output: str = ""
    error: str = ""

    def erasure(self) -> Erasure:
        return Erasure(job=self.job_id)


@attrs.frozen(kw_only=True)
class ResourceRevised(DomainEvent):
    """A new revision of a versioned resource (``user_md``, ``memory_md``, …)."""

    kind: ClassVar[str] = "resource.revised"
    refers_to_others: ClassVar[bool] = False
    agent_id: str
    owner_id: str = ""
    name: str
    revision: int
    content: str
    content_sha256: str
    reason: str = "rebuild"

    def erasure(self) -> Erasure:
        return Erasure(owners=((self.agent_id, self.owner_id),))


@attrs.frozen(kw_only=True)
class ResourceRolledBack(DomainEvent):
    kind: ClassVar[str] = "resource.rolled_back"
    refers_to_others: ClassVar[bool] = False
    agent_id: str
    owner_id: str = ""
    name: str
    to_revision: int
    new_revision: int
    content: str
    content_sha256: str
    provenance: Provenance

    def erasure(self) -> Erasure:
        return Erasure(owners=((self.agent_id, self.owner_id),))


@attrs.frozen(kw_only=True)
class ModelCallTraced(DomainEvent):
    """One model call (reviewer, compactor): who asked, which provider, cost and outcome."""

    kind: ClassVar[str] = "model.call_traced"
    refers_to_others: ClassVar[bool] = False
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

    def erasure(self) -> Erasure:
        return NO_OWNER_CONTENT  # provider, tokens, latency


# --- erasure -------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class OwnerForgotten(DomainEvent):
    """Everything one owner left with one agent was erased: the payloads of their events are
    redacted (the chain keeps their digests) and their projection rows deleted. This record of
    the erasure carries no content: who, when, on whose request and which events."""

    kind: ClassVar[str] = "owner.forgotten"
    refers_to_others: ClassVar[bool] = False
    schema: ClassVar[int] = 2
    agent_id: str
    owner_id: str
    erased_events: int
    provenance: Provenance
    # The log positions it redacted (``verify`` accounts every NULL payload by them); ``None``
    # for a schema-1 record, which only gave their number.
    redacted_positions: tuple[int, ...] | None = None
    # Conversations whose conversation-level events (compaction failures) it redacted: their
    # back-off is reset, as a replay without those events would have it.
    conversations: tuple[ConversationKey, ...] = ()

    def erasure(self) -> Erasure:
        return NO_OWNER_CONTENT  # the record of an erasure is never erased


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

# Kinds whose erasure must be decided on every event; any other event concerns an owner only
# if its payload names them.
REFERRING_KINDS: frozenset[str] = frozenset(cls.kind for cls in ALL_EVENTS if cls.refers_to_others)
