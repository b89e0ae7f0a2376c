"""Pins for domain/conversation_window.py: every field each window event sets, keeps or lifts."""

from __future__ import annotations

from datetime import timedelta

from fermix_memory.domain import conversation_window as cw
from fermix_memory.domain import events as ev
from tests.unit.test_domain_conversation_window import CONV, T0, WHO, compacted, failed, given

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
