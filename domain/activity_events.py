"""Events of the work around the memory: background reviews, memory sources and scheduled
jobs, revisions of the prompt files, and model calls."""

from __future__ import annotations

from datetime import datetime
from typing import ClassVar

import attrs

from fermix_memory.domain.event_base import NO_OWNER_CONTENT, DomainEvent, Erasure, Provenance
from fermix_memory.domain.values import ConversationKey, PromoteTarget

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
    refers_to_others: ClassVar[bool] = True  # MEMORY.md shows the rules of the agent's operators
    agent_id: str
    owner_id: str = ""
    name: str
    revision: int
    content: str
    content_sha256: str
    reason: str = "rebuild"

    def erasure(self) -> Erasure:
        return Erasure(owners=((self.agent_id, self.owner_id),),
                       revision=(self.agent_id, self.owner_id, self.name, self.revision),
                       shows_rules=self.name == PromoteTarget.MEMORY_MD.value, text=self.content)


@attrs.frozen(kw_only=True)
class ResourceRolledBack(DomainEvent):
    kind: ClassVar[str] = "resource.rolled_back"
    refers_to_others: ClassVar[bool] = True  # it repeats an earlier revision, maybe with others' rules
    agent_id: str
    owner_id: str = ""
    name: str
    to_revision: int
    new_revision: int
    content: str
    content_sha256: str
    provenance: Provenance

    def erasure(self) -> Erasure:
        return Erasure(owners=((self.agent_id, self.owner_id),),
                       revision=(self.agent_id, self.owner_id, self.name, self.new_revision), copies=self.to_revision,
                       text=self.content)


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
