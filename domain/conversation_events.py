"""Events of conversation history: messages appended or retracted, the window cleared or compacted."""

from __future__ import annotations

from datetime import datetime
from typing import Any, ClassVar

import attrs

from fermix_memory.domain.event_base import NO_OWNER_CONTENT, DomainEvent, Erasure, Provenance
from fermix_memory.domain.messages import Message
from fermix_memory.domain.values import ConversationKey, Role, Trust


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

    def message(self, position: int) -> Message:
        """The ``messages`` row this event makes at log ``position``."""
        return Message(id=position, agent_id=self.agent_id, owner_id=self.owner_id, conversation=self.conversation,
                       sender=self.sender, role=self.role, kind=self.message_kind, content=self.content,
                       metadata=self.metadata, trust=self.trust, created_at=self.created_at)

    def erasure(self) -> Erasure:
        owners = tuple((self.agent_id, o) for o in (self.owner_id, *self.quoted_owners))
        return Erasure(owners=owners, conversation=(self.agent_id, self.conversation), takes_part=True)


@attrs.frozen(kw_only=True)
class MessageRetracted(DomainEvent):
    """A host took back the newest message of a conversation's window (the OpenAI Agents SDK's
    ``pop_item``). The window, history recall and search no longer see it; the message stays in
    the log (ADR-0027). ``owner_id`` is the retracted message's owner."""

    kind: ClassVar[str] = "message.retracted"
    refers_to_others: ClassVar[bool] = False
    agent_id: str
    owner_id: str
    conversation: ConversationKey
    message_id: int
    provenance: Provenance

    def erasure(self) -> Erasure:
        # Ids only, but it belongs with the message: forgetting its owner redacts both, so a
        # replay neither shows the message nor retracts one it never saw.
        return Erasure(owners=((self.agent_id, self.owner_id),))


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
