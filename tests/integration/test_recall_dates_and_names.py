"""History recall by the days a question names (ADR-0075) and by the names its best turns speak of
(ADR-0077), on both stores, through the public API, the server's body and the CLI."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from fermix_memory import MemorySystem
from fermix_memory.application.settings_storage import DATABASE_URL_ENV
from fermix_memory.domain.errors import InvalidArgument
from tests.cli_runner import run_cli

pytestmark = pytest.mark.usefixtures("every_store")  # each test on SQLite and on PostgreSQL

AGENT = "ada"
CHAT = "telegram:7"
MAY_2 = datetime(2024, 5, 2, 18, 0, tzinfo=UTC)


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[MemorySystem]:
    system = MemorySystem.open(tmp_path / "home")
    yield system
    system.close()


def say(memory: MemorySystem, at: datetime, turns: list[tuple[str, str]], *, owner: str = "alice",
        chat: str = CHAT) -> list[int]:
    return [memory.append_message(agent_id=AGENT, owner_id=owner, conversation=chat, role="user", sender=sender,
                                  content=text, created_at=at + timedelta(minutes=i))
            for i, (sender, text) in enumerate(turns)]


def recalled(memory: MemorySystem, query: str, *, owner: str = "alice", **kw: object) -> list[int]:
    result = memory.recall(query, agent_id=AGENT, owner_id=owner, conversation=CHAT, source="history",
                           mode="keyword", **kw)  # type: ignore[arg-type]
    return [hit.message.id for hit in result.messages]


def three_days(memory: MemorySystem) -> dict[str, list[int]]:
    return {
        "may2": say(memory, MAY_2, [("Alice", "The plumber finally came round."), ("Bob", "About time!")]),
        "may3": say(memory, MAY_2 + timedelta(days=1), [("Alice", "I baked sourdough for the first time."),
                                                         ("Bob", "Save me a slice.")]),
        "may4": say(memory, MAY_2 + timedelta(days=2), [("Alice", "Rainy Saturday, staying in."),
                                                         ("Bob", "Same here.")]),
    }


def test_a_question_that_is_only_a_date_returns_that_days_turns(memory: MemorySystem) -> None:
    days = three_days(memory)
    assert sorted(recalled(memory, "What did we talk about on 3 May 2024?")) == days["may3"]
    assert sorted(recalled(memory, "what did we chat about on May 3rd?", as_of="2024-06-01T09:00Z")) == days["may3"]


def test_relative_days_count_back_from_as_of_or_else_from_the_newest_turn(memory: MemorySystem) -> None:
    days = three_days(memory)
    assert sorted(recalled(memory, "What did we talk about yesterday?", as_of="2024-05-03T20:00+00:00")) == days["may2"]
    # No as_of: the conversation was imported from the past, so "yesterday" is the day before its newest turn.
    assert sorted(recalled(memory, "What did we talk about yesterday?")) == days["may3"]
    assert recalled(memory, "What did we talk about yesterday?", as_of=datetime(2030, 1, 1, tzinfo=UTC)) == []


def test_a_turn_speaking_of_a_day_is_found_by_that_day(memory: MemorySystem) -> None:
    say(memory, datetime(2024, 2, 20, 9, 0, tzinfo=UTC), [("Alice", f"Small talk number {i}.") for i in range(5)])
    museum = say(memory, datetime(2024, 2, 29, 9, 0, tzinfo=UTC),  # a Thursday: "on Monday" is the 26th
                 [("Alice", "Spent the whole day at the natural history museum on Monday.")])
    assert recalled(memory, "What did Alice get up to on 26 February 2024?")[0] == museum[0]


def test_the_days_named_lift_the_turns_said_on_them(memory: MemorySystem) -> None:
    first = say(memory, datetime(2024, 3, 1, 12, 0, tzinfo=UTC), [("Alice", "Had pizza with Sam tonight.")])
    second = say(memory, datetime(2024, 3, 10, 12, 0, tzinfo=UTC), [("Alice", "Had pizza with Sam again.")])
    assert recalled(memory, "pizza with Sam on 10 March 2024")[0] == second[0]
    assert recalled(memory, "pizza with Sam on 1 March 2024")[0] == first[0]


def test_another_owners_turns_of_that_day_never_come_back(memory: MemorySystem) -> None:
    days = three_days(memory)
    theirs = say(memory, MAY_2 + timedelta(days=1), [("Carol", "Secret plans for the 3rd of May.")], owner="carol")
    found = recalled(memory, "What did we talk about on 3 May 2024?")
    assert sorted(found) == days["may3"] and not set(theirs) & set(found)


def test_a_bad_as_of_is_a_typed_error(memory: MemorySystem) -> None:
    for bad in ("yesterday", "2024-05-03T10:00", 17):
        with pytest.raises(InvalidArgument, match="as_of"):
            recalled(memory, "what did we talk about yesterday?", as_of=bad)


def test_the_names_of_the_best_turns_bring_the_turns_about_the_same_one(memory: MemorySystem) -> None:
    start = datetime(2024, 1, 5, 9, 0, tzinfo=UTC)
    say(memory, start, [("Bob", "How is your family doing, Alice?"),
                        ("Alice", "Good! My sister Mei is visiting next month.")])
    for week in range(1, 6):
        say(memory, start + timedelta(weeks=week), [("Bob", f"Any news from the garden, week {week}?"),
                                                    ("Alice", "The tomatoes are finally growing.")])
    job = say(memory, start + timedelta(weeks=7), [("Alice", "Mei got the job at the aquarium, by the way!")])
    assert job[0] in recalled(memory, "Where does Alice's sister work these days?")
    # A short question is not expanded: too little to say its best turns are about what it asks.
    assert job[0] not in recalled(memory, "sister")


def test_as_of_through_the_cli(memory: MemorySystem, tmp_path: Path) -> None:
    days = three_days(memory)
    memory.close()
    out = run_cli("--json", "memory", "search", "what did we talk about yesterday?", "--agent", AGENT,
                  "--owner", "alice", "--conversation", CHAT, "--source", "history", "--mode", "keyword",
                  "--as-of", "2024-05-03T20:00Z", home=tmp_path / "home")
    assert out.returncode == 0, out.stderr
    assert sorted(hit["message"]["id"] for hit in json.loads(out.stdout)["messages"]) == days["may2"]


def test_after_export_and_import_and_for_a_second_host_the_days_and_names_are_there(
        memory: MemorySystem, tmp_path: Path, every_store: str, request: pytest.FixtureRequest) -> None:
    days = three_days(memory)
    museum = say(memory, datetime(2024, 2, 29, 9, 0, tzinfo=UTC),
                 [("Alice", "Spent the whole day at the natural history museum on Monday.")])
    with MemorySystem.open(tmp_path / "home") as second_host:  # the same home, another host
        assert sorted(recalled(second_host, "What did we talk about yesterday?", as_of="2024-05-03T20:00Z")) \
            == days["may2"]
    lines = list(memory.export_events())
    if every_store == "postgres":  # the home folder alone does not name the store there: a database of its own
        os.environ[DATABASE_URL_ENV] = request.getfixturevalue("postgres_server").fresh_database()
    with MemorySystem.open(tmp_path / "imported") as imported:
        imported.import_events(lambda: lines)
        assert sorted(recalled(imported, "What did we talk about on 3 May 2024?")) == days["may3"]
        assert recalled(imported, "What did Alice get up to on 26 February 2024?")[0] == museum[0]
        assert imported.verify().ok
