"""The review gate and claim: given the review's events, when a command, then the events; the
exact edges of the time gates, the default of ``now`` and the length of a stored review error."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import pytest

from fermix_memory.domain import events as ev
from fermix_memory.domain import review_gate as gate
from fermix_memory.domain.values import ConversationKey

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
KEY = gate.ReviewKey(agent_id="ada", owner_id="alice", conversation=ConversationKey("telegram", "1"))
WHO = {"agent_id": "ada", "owner_id": "alice", "conversation": KEY.conversation}
TTL = timedelta(seconds=300)


def given(*events: ev.DomainEvent) -> gate.ReviewGateState:
    state = gate.ReviewGateState()
    for e in events:
        state = gate.evolve(state, e)
    return state


def claim(at: datetime = T0, *, last_user: int = 5, now: bool = False, interval: float = 24,
          claim_id: str = "c2") -> gate.ClaimReview:
    return gate.ClaimReview(key=KEY, at=at, last_user_message_id=last_user, claim_id=claim_id, holder="h",
                            interval_hours=interval, claim_ttl=TTL, now=now)


def claimed(at: datetime = T0, claim_id: str = "c1", after: int = 0) -> ev.ReviewClaimed:
    return ev.ReviewClaimed(at=at, claim_id=claim_id, holder="h", expires_at=at + TTL, reviewed_after_id=after,
                            **WHO)


def completed(at: datetime = T0, claim_id: str = "c1", up_to: int = 3) -> ev.ReviewCompleted:
    return ev.ReviewCompleted(at=at, claim_id=claim_id, reviewed_up_to_message_id=up_to, messages_reviewed=1,
                              applied=1, refused=0, **WHO)


def failed(at: datetime = T0, claim_id: str = "c1") -> ev.ReviewFailed:
    return ev.ReviewFailed(at=at, claim_id=claim_id, error="boom", retry_after=at + timedelta(minutes=5), **WHO)


def skipped(reason: str) -> ev.ReviewSkipped:
    return ev.ReviewSkipped(at=T0, reason=reason, **WHO)


def reasons(events: Sequence[ev.DomainEvent]) -> list[str]:
    return [e.reason for e in events if isinstance(e, ev.ReviewSkipped)]


def test_a_first_review_with_new_messages_is_claimed_from_the_start() -> None:
    [event] = gate.decide_claim(given(), claim())
    assert event == claimed(claim_id="c2")


def test_no_new_user_message_since_the_last_review_skips_it() -> None:
    state = given(claimed(), completed(up_to=5))
    assert reasons(gate.decide_claim(state, claim(T0 + timedelta(days=2), last_user=5, now=True))) \
        == ["no_new_messages"]


@pytest.mark.parametrize(("events", "at", "reason"), [
    ((), T0, "disabled"),
    ((claimed(), completed()), T0 + timedelta(hours=23), "under_interval"),
    ((claimed(), failed()), T0 + timedelta(minutes=4), "backoff"),
])
def test_the_time_gates_skip_a_review_unless_it_is_asked_for_now(
        events: tuple[ev.DomainEvent, ...], at: datetime, reason: str) -> None:
    state = given(*events)
    interval = 0 if reason == "disabled" else 24
    assert reasons(gate.decide_claim(state, claim(at, interval=interval))) == [reason]
    [event] = gate.decide_claim(state, claim(at, interval=interval, now=True))
    assert isinstance(event, ev.ReviewClaimed)


def test_a_live_claim_is_respected_and_an_expired_one_taken_over() -> None:
    state = given(claimed())
    assert reasons(gate.decide_claim(state, claim(T0 + TTL - timedelta(seconds=1), now=True))) == ["claimed"]
    [event] = gate.decide_claim(state, claim(T0 + TTL, now=True))
    assert isinstance(event, ev.ReviewClaimed) and event.claim_id == "c2"


def test_the_same_skip_reason_is_recorded_once_not_every_turn() -> None:
    state = given(claimed(), completed(), skipped("under_interval"))
    assert gate.decide_claim(state, claim(T0 + timedelta(hours=1))) == []
    assert gate.gate_reason(state, claim(T0 + timedelta(hours=1))) == "under_interval"


def test_a_failure_backs_off_and_releases_the_claim_only_while_it_is_ours() -> None:
    state = given(claimed())
    cmd = gate.FailReview(key=KEY, at=T0, claim_id="c1", error="boom", backoff=timedelta(minutes=5))
    [event] = gate.decide_fail(state, cmd)
    assert event == failed()
    after = gate.evolve(state, event)
    assert (after.claim_id, after.retry_after, after.last_error) == (None, T0 + timedelta(minutes=5), "boom")
    assert gate.decide_fail(given(claimed(claim_id="other")), cmd) == []


def test_completion_moves_the_reviewed_mark_and_a_lost_claim_applies_nothing() -> None:
    cmd = gate.CompleteReview(key=KEY, at=T0, claim_id="c1", reviewed_up_to_message_id=3, messages_reviewed=1,
                              applied=1, refused=0, nothing_to_save=False)
    [event] = gate.decide_complete(given(claimed()), cmd)
    assert event == completed()
    after = gate.evolve(given(claimed(), failed(), claimed(claim_id="c1")), event)
    assert (after.reviewed_up_to_id, after.last_review_at, after.retry_after, after.claim_id) == (3, T0, None, None)
    assert reasons(gate.decide_complete(given(claimed(claim_id="other")), cmd)) == ["claim_lost"]


def test_a_due_review_left_at_close_is_recorded_once_and_a_later_claim_clears_it() -> None:
    [event] = gate.decide_left_at_close(given(), claim())
    assert event == skipped(gate.LEFT_AT_CLOSE)
    assert gate.decide_left_at_close(given(event), claim()) == []  # recorded already
    assert gate.evolve(given(event), claimed()).last_skip_reason is None


@pytest.mark.parametrize("history, command", [
    ((completed(up_to=5),), claim(last_user=5)),  # nothing new: it would have skipped
    ((claimed(), completed(up_to=3)), claim(T0 + timedelta(hours=1))),  # under the interval
    ((claimed(),), claim(T0 + timedelta(seconds=1))),  # another process's live claim runs it
])
def test_a_review_left_at_close_that_was_not_due_is_not_recorded(
        history: tuple[ev.DomainEvent, ...], command: gate.ClaimReview) -> None:
    assert gate.decide_left_at_close(given(*history), command) == []


def test_a_claim_command_is_not_a_review_now_unless_asked() -> None:
    cmd = gate.ClaimReview(key=KEY, at=T0 + timedelta(hours=1), last_user_message_id=5, claim_id="c2",
                           holder="h", interval_hours=24, claim_ttl=TTL)
    assert cmd.now is False
    assert gate.gate_reason(given(completed()), cmd) == "under_interval"


def test_an_interval_of_zero_disables_the_review_and_any_positive_one_does_not() -> None:
    assert gate.gate_reason(given(), claim(interval=0)) == "disabled"
    assert gate.gate_reason(given(), claim(interval=-1)) == "disabled"
    assert gate.gate_reason(given(), claim(interval=0.5)) == ""
    assert gate.gate_reason(given(), claim(interval=1)) == ""


def test_the_interval_ends_exactly_interval_hours_after_the_last_review() -> None:
    state = given(completed(at=T0))
    assert gate.gate_reason(state, claim(at=T0 + timedelta(hours=2) - timedelta(microseconds=1), interval=2)) \
        == "under_interval"
    assert gate.gate_reason(state, claim(at=T0 + timedelta(hours=2), interval=2)) == ""


def test_the_backoff_ends_exactly_at_retry_after() -> None:
    state = given(ev.ReviewClaimed(at=T0, claim_id="c1", holder="h", expires_at=T0 + TTL, reviewed_after_id=0,
                                   **WHO),
                  ev.ReviewFailed(at=T0, claim_id="c1", error="boom", retry_after=T0 + timedelta(minutes=10),
                                  **WHO))
    assert gate.gate_reason(state, claim(at=T0 + timedelta(minutes=10) - timedelta(microseconds=1))) == "backoff"
    assert gate.gate_reason(state, claim(at=T0 + timedelta(minutes=10))) == ""


def test_a_stored_review_error_keeps_exactly_500_characters() -> None:
    def stored(error: str) -> str | None:
        return given(ev.ReviewFailed(at=T0, claim_id="c1", error=error, retry_after=T0, **WHO)).last_error

    assert gate.MAX_STORED_ERROR_CHARS == 500
    assert stored("e" * 500) == "e" * 500
    assert stored("e" * 499 + "xy") == "e" * 499 + "x"
