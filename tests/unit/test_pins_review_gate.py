"""Pins for domain/review_gate.py: the exact edges of the time gates, the default of ``now``
and the length of a stored review error."""

from __future__ import annotations

from datetime import timedelta

from fermix_memory.domain import events as ev
from fermix_memory.domain import review_gate as gate
from tests.unit.test_domain_review_gate import KEY, T0, TTL, WHO, claim, completed, given


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
