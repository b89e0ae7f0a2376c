"""Pins for domain/compaction_rules.py: the exact edge of the keep budget, the cost of an empty
window and the length of a stored compaction error."""

from __future__ import annotations

from datetime import timedelta

from fermix_memory.domain import compaction_rules as rules
from fermix_memory.domain import events as ev
from tests.unit.test_domain_compaction_rules import CONV, FRESH, T0, msg, plan


def test_messages_that_fill_half_the_budget_exactly_are_kept() -> None:
    planned = plan([msg(1), msg(2), msg(3)], [6, 6, 6], budget=40)  # each costs 10; keep budget 20
    assert [m.id for m in planned.older] == [1] and [m.id for m in planned.kept] == [2, 3]
    assert (planned.tokens_before, planned.kept_tokens) == (30, 20)
    tighter = plan([msg(1), msg(2), msg(3)], [6, 6, 6], budget=39)
    assert [m.id for m in tighter.kept] == [3] and tighter.kept_tokens == 10


def test_an_empty_window_costs_nothing() -> None:
    empty = plan([], [])
    assert empty.empty and (empty.tokens_before, empty.kept_tokens) == (0, 0)


def test_a_stored_compaction_error_keeps_exactly_1000_characters() -> None:
    def stored(error: str) -> str:
        [failed] = rules.decide_failure(FRESH, rules.FailCompaction(at=T0, agent_id="ada", conversation=CONV,
                                                                      error=error, backoff=timedelta(minutes=1)))
        assert isinstance(failed, ev.CompactionFailed)
        return failed.error

    assert rules.MAX_STORED_ERROR_CHARS == 1000
    assert stored("e" * 1000) == "e" * 1000
    assert stored("e" * 999 + "xy") == "e" * 999 + "x"
