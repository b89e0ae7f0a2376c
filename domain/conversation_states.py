"""The states kept per conversation, as frozen values: where its window starts
(:class:`ConversationWindow`, evolved in ``conversation_window``) and where its background review
stands (:class:`ReviewGateState`, decided and evolved in ``review_gate``).

Apart from the rules that evolve them, so that a reader of the projections (which hold one row
of each per conversation) does not load every event class the rules know.
"""

from __future__ import annotations

from datetime import datetime

import attrs

# The skip reason of a due review that its memory closed before it ran: the next opening runs it.
LEFT_AT_CLOSE = "left_at_close"


@attrs.frozen(kw_only=True)
class ConversationWindow:
    """Messages with an id above ``window_start_id`` are in the window (the checkpoint first)."""

    window_start_id: int = 0
    checkpoint_message_id: int | None = None
    compaction_retry_after: datetime | None = None
    compacted_at: datetime | None = None


@attrs.frozen(kw_only=True)
class ReviewGateState:
    """Where the background review of one (agent, owner, conversation) stands."""

    reviewed_up_to_id: int = 0
    last_review_at: datetime | None = None
    retry_after: datetime | None = None
    claim_id: str | None = None
    claim_expires_at: datetime | None = None
    last_skip_reason: str | None = None
    claim_holder: str | None = None
    last_error: str | None = None
