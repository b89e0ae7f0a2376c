"""A conversation's window as evolve over frozen state (R-WINDOW, compaction).

Where the window of one (agent, conversation) starts, which checkpoint leads it, when it was
last compacted and until when a failed compaction holds further attempts back. The
``conversation_state`` projection applies this ``evolve``.
"""

from __future__ import annotations

from datetime import datetime

import attrs

from fermix_memory.domain import events as ev


@attrs.frozen(kw_only=True)
class ConversationWindow:
    """Messages with an id above ``window_start_id`` are in the window (the checkpoint first)."""

    window_start_id: int = 0
    checkpoint_message_id: int | None = None
    compaction_retry_after: datetime | None = None
    compacted_at: datetime | None = None


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
