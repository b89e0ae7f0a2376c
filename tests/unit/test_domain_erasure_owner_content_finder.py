"""The owner-content finder (domain/erasure.py): which log positions carry one owner's content,
per agent, through direct owners, memory rows, jobs and the conversations the owner took part in."""

from __future__ import annotations

from typing import Any

from fermix_memory.domain.erasure import OwnerContentFinder
from fermix_memory.domain.event_base import Erasure
from fermix_memory.domain.values import ConversationKey

ROOM = ConversationKey(channel="chat", chat_id="room")
HALL = ConversationKey(channel="chat", chat_id="hall")


class Declared:
    """A logged event reduced to its erasure declaration."""

    def __init__(self, **fields: Any) -> None:
        self.declaration = Erasure(**fields)

    def erasure(self) -> Erasure:
        return self.declaration


def find(events: list[Erasure | dict[str, Any]], owner: str = "alice", agent: str | None = None
         ) -> OwnerContentFinder:
    finder = OwnerContentFinder(owner, agent)
    for position, fields in enumerate(events, start=1):
        finder.add(position, Declared(**fields))  # type: ignore[arg-type]
    return finder


def test_direct_owners_are_found_per_agent_and_sorted() -> None:
    events: list[Any] = [
        {"owners": (("a2", "alice"),)},
        {"owners": (("a1", "bob"),)},
        {"owners": (("a1", "bob"), ("a1", "alice"))},
        {},
        {"owners": (("a1", "alice"),)},
    ]
    assert find(events).positions() == {"a2": [1], "a1": [3, 5]}
    assert find(events, agent="a1").positions() == {"a1": [3, 5]}
    assert find(events, agent="a3").positions() == {}
    assert find(events, owner="bob").positions() == {"a1": [2, 3]}
    assert find(events, owner="carol").positions() == {}


def test_a_memory_row_belongs_to_the_first_owner_of_the_event_that_created_it() -> None:
    events: list[Any] = [
        {"owners": (("a1", "alice"),), "creates_row": True},  # row 1: alice's
        {"owners": (("a1", "bob"), ("a1", "alice")), "creates_row": True},  # row 2: bob's
        {"owners": (("a1", "alice"),)},  # no row created at 3
        {"memory_row": 2},
        {"memory_row": 1},
        {"memory_row": 3},
        {"memory_row": 99},
        {"creates_row": True},  # a row of nobody at 8
        {"memory_row": 8},
        {"owners": (("a2", "alice"),), "creates_row": True},  # row 10 of agent a2
        {"memory_row": 10},
    ]
    assert find(events).positions() == {"a1": [1, 2, 3, 5], "a2": [10, 11]}
    assert find(events, owner="bob").positions() == {"a1": [2, 4]}
    assert find(events, agent="a2").positions() == {"a2": [10, 11]}


def test_a_job_belongs_to_the_first_owner_of_the_event_that_created_it() -> None:
    events: list[Any] = [
        {"owners": (("a1", "alice"),), "creates_job": "j1"},
        {"owners": (("a1", "bob"), ("a1", "alice")), "creates_job": "j2"},
        {"creates_job": "j3"},
        {"job": "j2"},
        {"job": "j1"},
        {"job": "j3"},
        {"job": "unknown"},
        {"owners": (("a1", "alice"),)},
    ]
    assert find(events).positions() == {"a1": [1, 2, 5, 8]}
    assert find(events, owner="bob").positions() == {"a1": [2, 4]}
    assert find(events, agent="a2").positions() == {}


def test_conversation_text_belongs_to_every_participant() -> None:
    events: list[Any] = [
        {"conversation": ("a1", ROOM)},  # said before alice joined: still the room's text
        {"owners": (("a1", "alice"), ("a1", "bob")), "conversation": ("a1", ROOM), "takes_part": True},
        {"conversation": ("a1", ROOM)},
        {"owners": (("a1", "bob"),), "conversation": ("a1", HALL), "takes_part": True},
        {"conversation": ("a1", HALL)},
        {"owners": (("a2", "alice"),), "conversation": ("a2", ROOM), "takes_part": True},
        {"owners": (("a1", "alice"),), "conversation": ("a1", HALL)},  # her words, not taking part
    ]
    assert find(events).positions() == {"a1": [1, 2, 3, 7], "a2": [6]}
    assert find(events).conversations() == [("a1", ROOM)]
    assert find(events, owner="bob").positions() == {"a1": [1, 2, 3, 4, 5, 7]}
    assert find(events, owner="bob").conversations() == [("a1", HALL), ("a1", ROOM)]
    assert find(events, owner="bob", agent="a2").conversations() == []
    assert find(events, owner="carol").positions() == {}


def test_conversations_are_sorted_by_agent_then_scope_id_and_filtered_by_agent() -> None:
    events: list[Any] = []
    for agent in ("b", "a"):
        for room in (ROOM, HALL):
            events.append({"owners": ((agent, "alice"),), "conversation": (agent, room), "takes_part": True})
            events.append({"conversation": (agent, room)})
    assert find(events).conversations() == [("a", HALL), ("a", ROOM), ("b", HALL), ("b", ROOM)]
    assert find(events, agent="b").conversations() == [("b", HALL), ("b", ROOM)]
    assert find(events, agent="b").positions() == {"b": [1, 2, 3, 4]}


def revised(owner: str, number: int, *, agent: str = "a1", name: str = "memory_md", **more: Any) -> dict[str, Any]:
    return {"owners": ((agent, owner),), "revision": (agent, owner, name, number),
            "shows_rules": name == "memory_md", **more}


def test_other_owners_revisions_showing_the_owners_live_rules_are_found_and_listed() -> None:
    events: list[Any] = [
        revised("bob", 1),  # 1: no rule yet
        {"owners": (("a1", "alice"),), "creates_row": True, "shared_row": True},  # 2: alice's rule (row 2)
        revised("bob", 2),  # 3: shows it
        revised("bob", 1, name="user_md"),  # 4: USER.md never shows rules
        revised("bob", 1, agent="a2"),  # 5: another agent's rules
        {"memory_row": 2, "row_live": False},  # 6: archived
        revised("bob", 3),  # 7: no longer shows it
        revised("bob", 4, copies=2),  # 8: a rollback to revision 2: its text again
        revised("bob", 5, copies=3),  # 9: a rollback to a revision without it
        {"memory_row": 2, "row_live": True},  # 10: restored
        revised("carol", 1),  # 11
        revised("alice", 1),  # 12: her own file (found as hers)
        {"owners": (("a1", "bob"),), "creates_row": True, "shared_row": True},  # 13: bob's rule
    ]
    finder = find(events)
    assert finder.positions() == {"a1": [2, 3, 6, 8, 10, 11, 12]}  # 6, 10: her row
    assert [(r.owner_id, r.revision) for r in finder.revisions("a1")] == [("bob", 2), ("bob", 4), ("carol", 1)]
    assert find(events, agent="a2").positions() == {}
    assert find(events, owner="bob").positions() == {"a1": [1, 3, 4, 7, 8, 9, 13], "a2": [5]}
    assert find(events, owner="bob").revisions("a1") == ()  # bob's rule came last: no revision showed it
