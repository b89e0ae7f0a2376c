"""Compaction's decisions: given a window state and a command, the answer or the events; the
exact edge of the keep budget, the cost of an empty window and the length of a stored compaction
error."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from fermix_memory.domain import compaction_rules as rules
from fermix_memory.domain import events as ev
from fermix_memory.domain.conversation_window import ConversationWindow
from fermix_memory.domain.messages import Message
from fermix_memory.domain.values import ConversationKey, Role, Trust

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
CONV = ConversationKey("telegram", "1")
FRESH = ConversationWindow()


def msg(id: int, owner: str = "alice", *, trust: Trust = Trust.OPERATOR, role: Role = Role.USER,
        checkpoint_of: list[str] | None = None) -> Message:
    if checkpoint_of is not None:
        return Message(id=id, agent_id="ada", owner_id=owner, conversation=CONV, sender="compactor",
                       role=Role.SYSTEM, kind="checkpoint", content="summary",
                       metadata={"quoted_owners": checkpoint_of}, trust=trust, created_at=T0)
    return Message(id=id, agent_id="ada", owner_id=owner, conversation=CONV, sender=owner, role=role, kind="text",
                   content=f"message {id}", trust=trust, created_at=T0)


def check(peak: int | None = 900, *, enabled: bool = True, at: datetime = T0) -> rules.CheckDue:
    return rules.CheckDue(at=at, enabled=enabled, peak_prompt_tokens=peak, threshold=0.8, context_window=1000)


def plan(messages: list[Message], tokens: list[int], budget: int = 100,
         state: ConversationWindow = FRESH) -> rules.CompactionPlan:
    return rules.plan_compaction(state, rules.PlanCompaction(messages=tuple(messages), content_tokens=tuple(tokens),
                                                             budget=budget))


# --- due -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("command", "reason"), [
    (check(enabled=False), "disabled"),
    (check(None), "not_measured"),
    (check(799), "under_threshold"),
    (check(800), ""),
    (check(5000), ""),
])
def test_compaction_is_due_when_on_and_the_peak_reaches_the_threshold(command: rules.CheckDue, reason: str) -> None:
    assert rules.due_reason(FRESH, command) == reason
    assert rules.is_due(FRESH, command) is (reason == "")


def test_a_failed_compaction_holds_the_next_back_until_its_retry_time() -> None:
    held = ConversationWindow(compaction_retry_after=T0 + timedelta(seconds=60))
    assert rules.due_reason(held, check(at=T0 + timedelta(seconds=59))) == "backoff"
    assert rules.is_due(held, check(at=T0 + timedelta(seconds=60)))
    assert rules.measured_reason(check(at=T0)) == ""  # the back-off is the window state's, not a measurement


# --- plan ----------------------------------------------------------------------------------


def test_the_newest_messages_within_half_the_budget_are_kept() -> None:
    window = [msg(i) for i in range(1, 7)]
    result = plan(window, [10] * 6, budget=60)  # each costs 14; half the budget keeps two
    assert [m.id for m in result.older] == [1, 2, 3, 4] and [m.id for m in result.kept] == [5, 6]
    assert (result.tokens_before, result.kept_tokens, result.up_to) == (84, 28, 4)
    assert result.tokens_after(20) == 28 + 24


def test_at_least_one_message_is_replaced_and_only_an_empty_window_plans_nothing() -> None:
    assert [m.id for m in plan([msg(1), msg(2)], [1, 1], budget=10_000).older] == [1]
    assert [m.id for m in plan([msg(1)], [1], budget=10_000).older] == [1]
    assert plan([], [], budget=10_000).empty and plan([], []).tokens_before == 0


def test_a_message_larger_than_the_keep_budget_is_replaced_with_everything_before_it() -> None:
    result = plan([msg(1), msg(2), msg(3)], [1, 1, 500], budget=100)
    assert [m.id for m in result.older] == [1, 2, 3] and result.kept == ()


def test_a_previous_checkpoint_pulls_the_messages_before_its_id_into_the_new_summary() -> None:
    # The window is "after the replaced ids, checkpoint first": a checkpoint (id 9) leads messages 7 and 8.
    window = [msg(9, checkpoint_of=[]), msg(7), msg(8), msg(10), msg(11)]
    result = plan(window, [10, 10, 10, 10, 10], budget=60)
    assert [m.id for m in result.older] == [9, 7, 8] and [m.id for m in result.kept] == [10, 11]
    assert result.up_to == 9


def test_a_tool_result_is_never_kept_apart_from_the_call_it_answers() -> None:
    # 1 user, 2 assistant (the call), 3 and 4 its results, 5 the reply: half the budget would
    # keep 4 and 5, splitting result 4 from its call; the results go with their call instead.
    window = [msg(1), msg(2, role=Role.ASSISTANT), msg(3, role=Role.TOOL), msg(4, role=Role.TOOL),
              msg(5, role=Role.ASSISTANT)]
    result = plan(window, [10] * 5, budget=60)
    assert [m.id for m in result.older] == [1, 2, 3, 4] and [m.id for m in result.kept] == [5]
    assert result.kept_tokens == 14
    kept_whole = plan(window, [10] * 5, budget=120)  # room for the call and its results: nothing moves
    assert [m.id for m in kept_whole.kept] == [2, 3, 4, 5]


def test_messages_the_window_already_left_are_never_replaced_again() -> None:
    result = plan([msg(3), msg(4), msg(5), msg(6)], [10] * 4, budget=30, state=ConversationWindow(window_start_id=4))
    assert [m.id for m in result.older] == [5] and [m.id for m in result.kept] == [6]


def test_one_token_count_per_message_is_required() -> None:
    with pytest.raises(ValueError, match="one token count per message"):
        rules.PlanCompaction(messages=(msg(1),), content_tokens=(), budget=10)


def test_the_checkpoint_holds_the_owners_and_the_least_trust_of_what_it_replaces() -> None:
    result = plan([msg(1, "bob", trust=Trust.GUEST), msg(2, "carol"), msg(3, "alice"), msg(4)], [10] * 4, budget=30)
    assert [m.id for m in result.older] == [1, 2, 3]
    sources = result.sources
    assert (sources.owner_id, sources.quoted_owners, sources.trust) == ("alice", ("bob", "carol"), Trust.GUEST)
    assert result.checkpoint_metadata() == {"replaces_up_to": 3, "replaced": 3, "quoted_owners": ["bob", "carol"]}


def test_the_summary_may_use_a_quarter_of_the_budget_within_bounds() -> None:
    assert [rules.summary_max_tokens(b) for b in (100, 4000, 100_000)] == [256, 1000, 4096]
    assert rules.token_budget(0.5, 8001) == 4000


# --- events --------------------------------------------------------------------------------


def test_a_compaction_is_recorded_behind_its_checkpoint_and_moves_the_window() -> None:
    result = plan([msg(1), msg(2, "bob"), msg(3)], [10, 10, 10], budget=30)
    events = rules.decide_compacted(FRESH, rules.RecordCompaction(
        at=T0, agent_id="ada", conversation=CONV, plan=result, checkpoint_message_id=12, summary_tokens=6))
    assert events == [ev.HistoryCompacted(
        at=T0, agent_id="ada", conversation=CONV, up_to_message_id=2, checkpoint_message_id=12, replaced_count=2,
        tokens_before=42, tokens_after=14 + 10,
        provenance=ev.Provenance(agent_id="ada", owner_id="bob", source_type="compactor", reason="context window"))]


def test_an_empty_plan_records_nothing() -> None:
    assert rules.decide_compacted(FRESH, rules.RecordCompaction(
        at=T0, agent_id="ada", conversation=CONV, plan=plan([], []), checkpoint_message_id=2,
        summary_tokens=1)) == []


def test_a_failed_summary_backs_off_and_keeps_a_bounded_error() -> None:
    [event] = rules.decide_failure(FRESH, rules.FailCompaction(
        at=T0, agent_id="ada", conversation=CONV, error="E" * 5000, backoff=timedelta(seconds=60)))
    assert event == ev.CompactionFailed(at=T0, agent_id="ada", conversation=CONV,
                                        retry_after=T0 + timedelta(seconds=60),
                                        error="E" * rules.MAX_STORED_ERROR_CHARS)


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
