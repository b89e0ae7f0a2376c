"""The background review's gate and claim (R-REVIEW-GATE) as decide/evolve over frozen state.

One :class:`ReviewGateState` per (agent, owner, conversation). ``decide_*`` check the rules and
return the events to record (or none); :func:`evolve` applies one event. The same ``evolve``
defines the ``review_state`` projection (a test folds the log through it and compares).
Times, ids and settings are passed in: nothing here reads a clock or draws a random id.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import attrs

from fermix_memory.domain import events as ev
from fermix_memory.domain.conversation_states import LEFT_AT_CLOSE as LEFT_AT_CLOSE
from fermix_memory.domain.conversation_states import ReviewGateState as ReviewGateState
from fermix_memory.domain.values import ConversationKey

MAX_STORED_ERROR_CHARS = 500


@attrs.frozen(kw_only=True)
class ReviewKey:
    agent_id: str
    owner_id: str
    conversation: ConversationKey


@attrs.frozen(kw_only=True)
class ClaimReview:
    """Gate a review and, when it is due, claim it for ``holder`` until ``at + claim_ttl``."""

    key: ReviewKey
    at: datetime
    last_user_message_id: int
    claim_id: str
    holder: str
    interval_hours: float
    claim_ttl: timedelta
    now: bool = False  # bypass the interval and back-off gates (an explicit "review now")


@attrs.frozen(kw_only=True)
class FailReview:
    key: ReviewKey
    at: datetime
    claim_id: str
    error: str
    backoff: timedelta


@attrs.frozen(kw_only=True)
class CompleteReview:
    key: ReviewKey
    at: datetime
    claim_id: str
    reviewed_up_to_message_id: int
    messages_reviewed: int
    applied: int
    refused: int
    nothing_to_save: bool


def gate_reason(state: ReviewGateState, cmd: ClaimReview) -> str:
    """Why the review may not run now (``""``: it may, and is claimed)."""
    if cmd.last_user_message_id <= state.reviewed_up_to_id:
        return "no_new_messages"
    if not cmd.now and cmd.interval_hours <= 0:
        return "disabled"
    if (not cmd.now and state.last_review_at is not None
            and cmd.at < state.last_review_at + timedelta(hours=cmd.interval_hours)):
        return "under_interval"
    if not cmd.now and state.retry_after is not None and cmd.at < state.retry_after:
        return "backoff"
    if state.claim_id is not None and state.claim_expires_at is not None and cmd.at < state.claim_expires_at:
        return "claimed"  # a claim past its expiry was left by a dead process: it is taken over
    return ""


def decide_claim(state: ReviewGateState, cmd: ClaimReview) -> list[ev.DomainEvent]:
    k = cmd.key
    reason = gate_reason(state, cmd)
    if reason:
        # One event per change of reason, not one per turn: the log stays readable.
        if reason == state.last_skip_reason:
            return []
        return [ev.ReviewSkipped(at=cmd.at, agent_id=k.agent_id, owner_id=k.owner_id, conversation=k.conversation,
                                 reason=reason)]
    return [ev.ReviewClaimed(at=cmd.at, agent_id=k.agent_id, owner_id=k.owner_id, conversation=k.conversation,
                             claim_id=cmd.claim_id, holder=cmd.holder, expires_at=cmd.at + cmd.claim_ttl,
                             reviewed_after_id=state.reviewed_up_to_id)]


def decide_left_at_close(state: ReviewGateState, cmd: ClaimReview) -> list[ev.DomainEvent]:
    """A review that was queued but not run when its memory closed: recorded as skipped for
    :data:`LEFT_AT_CLOSE` when it was due then, so that the next opening runs it. Nothing when it
    was not due (nothing is lost: it would have skipped) or is recorded so already."""
    if gate_reason(state, cmd) or state.last_skip_reason == LEFT_AT_CLOSE:
        return []
    k = cmd.key
    return [ev.ReviewSkipped(at=cmd.at, agent_id=k.agent_id, owner_id=k.owner_id, conversation=k.conversation,
                             reason=LEFT_AT_CLOSE)]


def decide_fail(state: ReviewGateState, cmd: FailReview) -> list[ev.DomainEvent]:
    if state.claim_id != cmd.claim_id:
        return []  # the claim expired and another review took over: its state is not ours
    k = cmd.key
    return [ev.ReviewFailed(at=cmd.at, agent_id=k.agent_id, owner_id=k.owner_id, conversation=k.conversation,
                            claim_id=cmd.claim_id, error=cmd.error, retry_after=cmd.at + cmd.backoff)]


def decide_complete(state: ReviewGateState, cmd: CompleteReview) -> list[ev.DomainEvent]:
    """Completion (or ``claim_lost``: nothing of the review may then be applied)."""
    k = cmd.key
    if state.claim_id != cmd.claim_id:
        return [ev.ReviewSkipped(at=cmd.at, agent_id=k.agent_id, owner_id=k.owner_id, conversation=k.conversation,
                                 reason="claim_lost")]
    return [ev.ReviewCompleted(
        at=cmd.at, agent_id=k.agent_id, owner_id=k.owner_id, conversation=k.conversation, claim_id=cmd.claim_id,
        reviewed_up_to_message_id=cmd.reviewed_up_to_message_id, messages_reviewed=cmd.messages_reviewed,
        applied=cmd.applied, refused=cmd.refused, nothing_to_save=cmd.nothing_to_save)]


def _released(state: ReviewGateState) -> ReviewGateState:
    return attrs.evolve(state, claim_id=None, claim_holder=None, claim_expires_at=None, last_skip_reason=None)


def evolve(state: ReviewGateState, event: ev.DomainEvent) -> ReviewGateState:
    if isinstance(event, ev.ReviewClaimed):
        return attrs.evolve(state, claim_id=event.claim_id, claim_holder=event.holder,
                            claim_expires_at=event.expires_at, last_skip_reason=None)
    if isinstance(event, ev.ReviewCompleted):
        return attrs.evolve(_released(state), reviewed_up_to_id=event.reviewed_up_to_message_id,
                            last_review_at=event.at, retry_after=None, last_error=None)
    if isinstance(event, ev.ReviewSkipped):
        return attrs.evolve(state, last_skip_reason=event.reason)
    if isinstance(event, ev.ReviewFailed):
        return attrs.evolve(_released(state), retry_after=event.retry_after,
                            last_error=event.error[:MAX_STORED_ERROR_CHARS])
    return state


REVIEW_EVENTS = (ev.ReviewClaimed, ev.ReviewCompleted, ev.ReviewSkipped, ev.ReviewFailed)
