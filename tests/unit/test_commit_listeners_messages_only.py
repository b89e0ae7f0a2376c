"""The commit listeners' quick answers for a commit of messages only agree with their general
reading: over every arrangement of messages, an erasure and a rule change, up to four events."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime

import pytest

from fermix_memory.application.log_position import erases
from fermix_memory.application.shown_prompt_files import may_change_rules_of
from fermix_memory.application.store_ports import RecordedEvent
from fermix_memory.domain import events as ev
from fermix_memory.domain.values import Category, ConversationKey, Role, ScopeType, Trust

AT = datetime(2026, 3, 1, tzinfo=UTC)
ROOM = ConversationKey("tg", "1")
WHO = ev.Provenance(agent_id="ada", owner_id="olga", trust=Trust.OPERATOR)

MESSAGE = ev.MessageAppended(at=AT, agent_id="ada", owner_id="alice", conversation=ROOM, sender="alice",
                             role=Role.USER, content="hello", created_at=AT)
ERASURE = ev.OwnerForgotten(at=AT, agent_id="ada", owner_id="alice", erased_events=1, provenance=WHO,
                            conversations=(ROOM,))
RULE = ev.MemoryArchived(at=AT, memory_id=7, archived_by="olga", reason="stale", provenance=WHO)
KINDS = (MESSAGE, ERASURE, RULE)


def commits() -> list[list[RecordedEvent]]:
    return [[RecordedEvent(position=i + 1, stream="s", version=i + 1, event=e) for i, e in enumerate(events)]
            for n in range(5) for events in itertools.product(KINDS, repeat=n)]


@pytest.mark.parametrize("recorded", commits())
def test_a_commit_erases_exactly_when_one_of_its_events_is_an_erasure(recorded: list[RecordedEvent]) -> None:
    assert erases(recorded) == any(isinstance(r.event, ev.ERASURE_RECORDS) for r in recorded)


def test_a_message_changes_no_rule_so_a_commit_of_messages_only_is_passed_over() -> None:
    assert may_change_rules_of(MESSAGE) is None
    assert may_change_rules_of(RULE) == "ada"
    added = ev.MemoryAdded(at=AT, agent_id="ada", owner_id="olga", scope_type=ScopeType.AGENT,
                           scope_id="ada", category=Category.DIRECTIVE, key="language", value="English",
                           provenance=WHO)
    assert may_change_rules_of(added) == "ada"
