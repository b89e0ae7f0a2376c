"""Events of memory rows (added, replaced, archived, restored, an operation refused) and of
forgetting an owner, one row or one conversation."""

from __future__ import annotations

from datetime import datetime
from typing import ClassVar

import attrs

from fermix_memory.domain.event_base import NO_OWNER_CONTENT, DomainEvent, Erasure, Provenance, RowStatement
from fermix_memory.domain.values import Category, ConversationKey, PromoteTarget, ScopeType


@attrs.frozen(kw_only=True)
class MemoryAdded(DomainEvent):
    """A new memory row. Its memory id is this event's log position."""

    kind: ClassVar[str] = "memory.added"
    # 2: the provenance may name its exact source messages (ADR-0034); 3: the row may have its own
    # expiry (ADR-0082), left out of the payload when it has none.
    schema: ClassVar[int] = 3
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
    expires_at: datetime | None = None

    def erasure(self) -> Erasure:
        shared = (self.category == Category.DIRECTIVE and self.scope_type == ScopeType.AGENT
                  and self.promote_target == PromoteTarget.MEMORY_MD)  # scopes.is_agent_rule
        statement = RowStatement(category=self.category, promote_target=self.promote_target, value=self.value,
                                 scope_type=self.scope_type)
        return Erasure(owners=((self.agent_id, self.owner_id),), creates_row=True, shared_row=shared,
                       statement=statement)


@attrs.frozen(kw_only=True)
class MemoryReplaced(DomainEvent):
    """A row's statement changed (latest statement wins). Un-archives the row if archived.
    ``expires_at`` is the row's expiry after the change (a replace that names none keeps it)."""

    kind: ClassVar[str] = "memory.replaced"
    schema: ClassVar[int] = 3  # as MemoryAdded's
    refers_to_others: ClassVar[bool] = True
    memory_id: int
    category: Category
    key: str
    value: str
    confidence: float
    promote_target: PromoteTarget | None = None
    previous_value: str
    provenance: Provenance
    expires_at: datetime | None = None

    def erasure(self) -> Erasure:
        statement = RowStatement(category=self.category, promote_target=self.promote_target, value=self.value)
        return Erasure(memory_row=self.memory_id, row_live=True, statement=statement)


@attrs.frozen(kw_only=True)
class MemoryArchived(DomainEvent):
    kind: ClassVar[str] = "memory.archived"
    schema: ClassVar[int] = 2  # 2: the provenance may name its exact source messages (ADR-0034)
    refers_to_others: ClassVar[bool] = True
    memory_id: int
    archived_by: str
    reason: str
    provenance: Provenance

    def erasure(self) -> Erasure:
        return Erasure(memory_row=self.memory_id, row_live=False)


@attrs.frozen(kw_only=True)
class MemoryRestored(DomainEvent):
    kind: ClassVar[str] = "memory.restored"
    refers_to_others: ClassVar[bool] = True
    memory_id: int
    restored_by: str
    provenance: Provenance

    def erasure(self) -> Erasure:
        return Erasure(memory_row=self.memory_id, row_live=True)


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


# --- erasure -------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class RedactedRevision:
    """One revision of another owner's prompt file that an erasure redacted (same agent)."""

    owner_id: str
    name: str
    revision: int


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
    # Other owners' prompt-file revisions among the redacted events (their MEMORY.md showed this
    # owner's standing rules): their rows go too, each file's current revision falls back to
    # its newest one left.
    redacted_revisions: tuple[RedactedRevision, ...] = ()

    def erasure(self) -> Erasure:
        return NO_OWNER_CONTENT  # the record of an erasure is never erased


@attrs.frozen(kw_only=True)
class MemoryForgotten(DomainEvent):
    """One memory row was erased: the events that carried its value (its add, replaces, archive
    and restore records, refusals naming it, and the prompt-file revisions that showed it) are
    redacted and the row is deleted. Like :class:`OwnerForgotten`, this record carries no
    content: which row, whose, which events, who asked and why."""

    kind: ClassVar[str] = "memory.forgotten"
    refers_to_others: ClassVar[bool] = False
    agent_id: str
    owner_id: str
    memory_id: int
    # The log positions it redacted: ``verify`` accounts for these NULL payloads by them.
    redacted_positions: tuple[int, ...]
    # Prompt-file revisions among the redacted events (the owner's own, and every owner's
    # MEMORY.md when the row was a standing rule of the agent): their rows go, each file's
    # current revision falls back to its newest one left.
    redacted_revisions: tuple[RedactedRevision, ...] = ()
    provenance: Provenance

    def erasure(self) -> Erasure:
        return NO_OWNER_CONTENT  # the record of an erasure is never erased


@attrs.frozen(kw_only=True)
class ConversationForgotten(DomainEvent):
    """One conversation with an agent was erased: its messages and checkpoints, its window and
    compaction records, the reviews of it, and the memory rows learnt only from it (with every
    event that carried their values). The record carries no content: which conversation, who
    took part, which events and rows, who asked and why."""

    kind: ClassVar[str] = "conversation.forgotten"
    refers_to_others: ClassVar[bool] = False
    agent_id: str
    conversation: ConversationKey
    owners: tuple[str, ...]
    memory_ids: tuple[int, ...]
    # The log positions it redacted: ``verify`` accounts for these NULL payloads by them.
    redacted_positions: tuple[int, ...]
    redacted_revisions: tuple[RedactedRevision, ...] = ()
    provenance: Provenance

    def erasure(self) -> Erasure:
        return NO_OWNER_CONTENT  # the record of an erasure is never erased
