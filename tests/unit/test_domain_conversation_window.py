"""A conversation's window: given its events, the state they leave, and every field each window
event sets, keeps or lifts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from fermix_memory.domain import conversation_window as cw
from fermix_memory.domain import events as ev
from fermix_memory.domain.checkpoint import CHECKPOINT_KIND, CHECKPOINT_SENDER
from fermix_memory.domain.values import ConversationKey, Role, Trust

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
CONV = ConversationKey("telegram", "1")
WHO = ev.Provenance(agent_id="ada", owner_id="alice")


def given(*events: ev.DomainEvent) -> cw.ConversationWindow:
    state = cw.ConversationWindow()
    for e in events:
        state = cw.evolve(state, e)
    return state


def compacted(up_to: int = 10, checkpoint: int = 12) -> ev.HistoryCompacted:
    return ev.HistoryCompacted(at=T0, agent_id="ada", conversation=CONV, up_to_message_id=up_to,
                               checkpoint_message_id=checkpoint, replaced_count=5, provenance=WHO)


def failed() -> ev.CompactionFailed:
    return ev.CompactionFailed(at=T0, agent_id="ada", conversation=CONV, error="boom",
                               retry_after=T0 + timedelta(minutes=5))


def test_a_compaction_moves_the_window_behind_its_checkpoint_and_lifts_a_back_off() -> None:
    assert given(failed(), compacted()) == cw.ConversationWindow(window_start_id=10, checkpoint_message_id=12,
                                                                  compacted_at=T0)


def test_a_failed_compaction_holds_the_next_one_back_until_its_retry_time() -> None:
    assert given(compacted(), failed()).compaction_retry_after == T0 + timedelta(minutes=5)


def test_clearing_the_window_drops_the_checkpoint_and_keeps_when_it_was_compacted() -> None:
    cleared = ev.ConversationWindowCleared(at=T0 + timedelta(hours=1), agent_id="ada", conversation=CONV,
                                           up_to_message_id=20, provenance=WHO)
    assert given(compacted(), failed(), cleared) == cw.ConversationWindow(window_start_id=20, compacted_at=T0)


def test_an_erasure_lifts_the_back_off_of_a_conversation_it_touched() -> None:
    forgotten = ev.OwnerForgotten(at=T0, agent_id="ada", owner_id="alice", erased_events=1, redacted_positions=(3,),
                                  conversations=(CONV,), provenance=WHO)
    assert given(compacted(), failed(), forgotten) == given(compacted())


# --- retraction -------------------------------------------------------------------------------


def said(text: str, *, minutes: int = 0, trust: Trust = Trust.GUEST, kind: str = "text",
         sender: str = "alice") -> ev.MessageAppended:
    return ev.MessageAppended(at=T0, agent_id="ada", owner_id="alice", conversation=CONV, sender=sender,
                              role=Role.USER, message_kind=kind, content=text, trust=trust,
                              created_at=T0 + timedelta(minutes=minutes))


def retract(history: list[tuple[int, ev.DomainEvent]], trust: Trust = Trust.GUEST) -> list[ev.MessageRetracted]:
    who = ev.Provenance(agent_id="ada", owner_id="alice", trust=trust)
    return cw.decide_retraction(history, cw.RetractNewest(at=T0, agent_id="ada", conversation=CONV, provenance=who))


def test_the_newest_message_of_the_window_is_retracted_in_the_windows_order() -> None:
    history: list[tuple[int, ev.DomainEvent]] = [(1, said("a", minutes=5)), (2, said("b", minutes=1))]
    [decided] = retract(history)
    assert (decided.message_id, decided.owner_id, decided.provenance.trust) == (1, "alice", Trust.GUEST)
    assert [e.message_id for e in retract([*history, (3, decided)])] == [2], "a retracted message is gone"


def test_nothing_before_a_clear_and_never_the_checkpoint_is_retracted() -> None:
    cleared = ev.ConversationWindowCleared(at=T0, agent_id="ada", conversation=CONV, up_to_message_id=1,
                                           provenance=WHO)
    assert retract([(1, said("a")), (2, cleared)]) == []
    summary = said("summary", kind=CHECKPOINT_KIND, sender=CHECKPOINT_SENDER)
    assert retract([(1, said("a")), (2, summary), (3, compacted(up_to=1, checkpoint=2))]) == []
    assert [e.message_id for e in retract([(1, said("a")), (2, summary), (3, compacted(up_to=1, checkpoint=2)),
                                           (4, said("b"))])] == [4]


def test_a_guest_cannot_take_back_an_operators_words() -> None:
    history: list[tuple[int, ev.DomainEvent]] = [(1, said("always answer in French", trust=Trust.OPERATOR))]
    with pytest.raises(cw.RetractionRefused):
        retract(history)
    assert [e.message_id for e in retract(history, Trust.OPERATOR)] == [1]


def test_of_two_messages_written_at_the_same_moment_the_higher_id_is_the_newest() -> None:
    history: list[tuple[int, ev.DomainEvent]] = [(1, said("a", minutes=3)), (2, said("b", minutes=3)),
                                                 (3, said("c", minutes=2))]
    assert cw.newest_in_window(history) == (2, history[1][1])
    assert [e.message_id for e in retract(history)] == [2]
    reversed_log: list[tuple[int, ev.DomainEvent]] = [(5, said("x", minutes=3)), (4, said("y", minutes=3))]
    assert cw.newest_in_window(reversed_log) == (5, reversed_log[0][1]), "by id, not by the order read"


LATER = T0 + timedelta(hours=1)


def cleared(up_to: int) -> ev.ConversationWindowCleared:
    return ev.ConversationWindowCleared(at=LATER, agent_id="ada", conversation=CONV, up_to_message_id=up_to,
                                        provenance=WHO)


def forgotten() -> ev.OwnerForgotten:
    return ev.OwnerForgotten(at=LATER, agent_id="ada", owner_id="alice", erased_events=1, provenance=WHO,
                             conversations=(CONV,))


def test_a_window_that_never_changed_starts_before_every_message() -> None:
    assert given() == cw.ConversationWindow(window_start_id=0, checkpoint_message_id=None,
                                            compaction_retry_after=None, compacted_at=None)


def test_each_window_event_sets_exactly_its_fields() -> None:
    done = given(compacted(up_to=10, checkpoint=12))
    assert done == cw.ConversationWindow(window_start_id=10, checkpoint_message_id=12, compacted_at=T0)
    held = given(compacted(), failed())
    assert held == cw.ConversationWindow(window_start_id=10, checkpoint_message_id=12, compacted_at=T0,
                                         compaction_retry_after=T0 + timedelta(minutes=5))
    assert given(compacted(), failed(), cleared(20)) == cw.ConversationWindow(window_start_id=20, compacted_at=T0)
    assert given(compacted(), failed(), forgotten()) == done
    assert given(failed(), compacted(up_to=11, checkpoint=13)) == cw.ConversationWindow(
        window_start_id=11, checkpoint_message_id=13, compacted_at=T0)


def test_other_events_leave_the_window_as_it_is() -> None:
    state = given(compacted(), failed())
    other = ev.ResourceRevised(at=LATER, agent_id="ada", name="USER.md", revision=1, content="x",
                               content_sha256="")
    assert cw.evolve(state, other) is state
