"""A conversation's window as evolve over frozen state (R-WINDOW, compaction), and the
decision to retract its newest message.

Where the window of one (agent, conversation) starts, which checkpoint leads it, when it was
last compacted and until when a failed compaction holds further attempts back. The
``conversation_state`` projection applies this ``evolve``.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

import attrs

from fermix_memory.domain import events as ev
from fermix_memory.domain.checkpoint import is_checkpoint_shape
from fermix_memory.domain.conversation_states import ConversationWindow as ConversationWindow
from fermix_memory.domain.errors import DomainError
from fermix_memory.domain.event_base import Provenance
from fermix_memory.domain.values import ConversationKey, Trust

WINDOW_EVENTS = (ev.ConversationWindowCleared, ev.HistoryCompacted, ev.CompactionFailed)


def evolve(state: ConversationWindow, event: ev.DomainEvent) -> ConversationWindow:
    if isinstance(event, ev.ConversationWindowCleared):
        # ``/new``: nothing before leads the window any more; a pending back-off is lifted.
        return attrs.evolve(state, window_start_id=event.up_to_message_id, checkpoint_message_id=None,
                            compaction_retry_after=None)
    if isinstance(event, ev.HistoryCompacted):
        # The checkpoint message (appended earlier) stays visible; everything before it leaves.
        return attrs.evolve(state, window_start_id=event.up_to_message_id,
                            checkpoint_message_id=event.checkpoint_message_id, compacted_at=event.at,
                            compaction_retry_after=None)
    if isinstance(event, ev.CompactionFailed):
        return attrs.evolve(state, compaction_retry_after=event.retry_after)
    if isinstance(event, ev.OwnerForgotten):
        # For each of ``event.conversations``: a redacted failure no longer holds it back.
        return attrs.evolve(state, compaction_retry_after=None)
    return state


# --- retraction: a host takes back the newest message of the window (ADR-0027) ------------------


class RetractionRefused(DomainError):
    """The newest message of the window is not one the caller may take back."""


@attrs.frozen(kw_only=True)
class RetractNewest:
    """Take back the newest message of ``conversation``'s window, on behalf of ``provenance``."""

    at: datetime
    agent_id: str
    conversation: ConversationKey
    provenance: Provenance


def newest_in_window(history: Iterable[tuple[int, ev.DomainEvent]]) -> tuple[int, ev.MessageAppended] | None:
    """The window's newest message, in the window's order (``created_at``, then id), given the
    conversation stream's events with their log positions: messages after the last clear or
    compaction, not retracted, and never the compaction checkpoint (the summary of what left
    the window is not a message anybody added)."""
    start, checkpoint = 0, None
    live: dict[int, ev.MessageAppended] = {}
    for position, event in history:
        if isinstance(event, ev.MessageAppended):
            live[position] = event
        elif isinstance(event, ev.MessageRetracted):
            live.pop(event.message_id, None)
        elif isinstance(event, ev.ConversationWindowCleared):
            start, checkpoint = event.up_to_message_id, None
        elif isinstance(event, ev.HistoryCompacted):
            start, checkpoint = event.up_to_message_id, event.checkpoint_message_id
    candidates = [(e.created_at, p, e) for p, e in live.items()
                  if p > start and p != checkpoint and not is_checkpoint_shape(e.message_kind, e.sender)]
    if not candidates:
        return None
    _, position, message = max(candidates, key=lambda c: (c[0], c[1]))
    return position, message


def decide_retraction(history: Iterable[tuple[int, ev.DomainEvent]], cmd: RetractNewest) -> list[ev.MessageRetracted]:
    """The retraction of the window's newest message (none when the window holds no message),
    given the conversation stream's events (see :func:`retraction_of`)."""
    newest = newest_in_window(history)
    if newest is None:
        return []
    position, message = newest
    return retraction_of(position, message.trust, message.owner_id, cmd)


def retraction_of(message_id: int, trust: Trust, owner_id: str, cmd: RetractNewest) -> list[ev.MessageRetracted]:
    """The retraction of the window's newest message, ``message_id`` (said with ``trust``, owned
    by ``owner_id``), as :func:`newest_in_window` finds it. A guest cannot take back an
    operator's words: :class:`RetractionRefused`."""
    if trust is Trust.OPERATOR and cmd.provenance.trust is not Trust.OPERATOR:
        raise RetractionRefused("only the operator can take back an operator's message")
    return [ev.MessageRetracted(at=cmd.at, agent_id=cmd.agent_id, owner_id=owner_id,
                                conversation=cmd.conversation, message_id=message_id, provenance=cmd.provenance)]
