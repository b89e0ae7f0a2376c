"""Forgetting an owner takes their retracted messages and the retraction records with them: a
replay must neither show the message nor retract one it never saw."""

from __future__ import annotations

from datetime import UTC, datetime

from fermix_memory.domain import events as ev
from fermix_memory.domain.erasure import OwnerContentFinder
from fermix_memory.domain.values import ConversationKey, Role

AT = datetime(2026, 3, 1, tzinfo=UTC)
ROOM = ConversationKey("tg", "1")


def said(owner: str) -> ev.MessageAppended:
    return ev.MessageAppended(at=AT, agent_id="ada", owner_id=owner, conversation=ROOM, sender=owner,
                              role=Role.USER, content=f"hello from {owner}", created_at=AT)


def retracted(owner: str, message_id: int) -> ev.MessageRetracted:
    return ev.MessageRetracted(at=AT, agent_id="ada", owner_id=owner, conversation=ROOM, message_id=message_id,
                               provenance=ev.Provenance(agent_id="ada", owner_id=owner))


def test_the_retraction_of_an_owners_message_goes_with_the_owner() -> None:
    log = [said("alice"), said("bob"), retracted("alice", 1), retracted("bob", 2)]
    for owner, positions in (("alice", [1, 3]), ("bob", [2, 4])):
        finder = OwnerContentFinder(owner)
        for position, event in enumerate(log, start=1):
            finder.add(position, event)
        assert finder.positions() == {"ada": positions}
