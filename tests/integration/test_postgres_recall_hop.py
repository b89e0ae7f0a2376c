"""The second hop of recall (ADR-0077) on PostgreSQL: a question it expands reads its best
turns' marks with the candidates, so the hop costs no statement of its own for them; what it
finds is what SQLite finds."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from fermix_memory import MemorySystem

AGENT = "ada"
CHAT = "telegram:7"
START = datetime(2024, 1, 5, 9, 0, tzinfo=UTC)


@pytest.fixture(params=["sqlite", "postgres"])
def memory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MemorySystem]:
    config: dict[str, Any] = {}
    if request.param == "postgres":
        config = {"fermix_core": {"storage": {"url": request.getfixturevalue("postgres_url")}}}
    with MemorySystem.open(tmp_path / "home", config=config) as system:
        yield system


def say(memory: MemorySystem, at: datetime, turns: list[tuple[str, str]]) -> list[int]:
    return [memory.append_message(agent_id=AGENT, owner_id="alice", conversation=CHAT, role="user", sender=sender,
                                  content=text, created_at=at + timedelta(minutes=i))
            for i, (sender, text) in enumerate(turns)]


def recalled(memory: MemorySystem, query: str) -> list[int]:
    result = memory.recall(query, agent_id=AGENT, owner_id="alice", conversation=CHAT, source="history",
                           mode="keyword")
    return [hit.message.id for hit in result.messages]


def family(memory: MemorySystem) -> tuple[list[int], list[int]]:
    first = say(memory, START, [("Bob", "How is your family doing, Alice?"),
                                ("Alice", "Good! My sister Mei is visiting next month.")])
    for week in range(1, 6):
        say(memory, START + timedelta(weeks=week), [("Bob", f"Any news from the garden, week {week}?"),
                                                    ("Alice", "The tomatoes are finally growing.")])
    job = say(memory, START + timedelta(weeks=7), [("Alice", "Mei got the job at the aquarium, by the way!")])
    memory.wait_for_background()
    return first, job


def test_the_names_of_the_best_turns_bring_the_same_turns_on_every_store(memory: MemorySystem) -> None:
    first, job = family(memory)
    found = recalled(memory, "Where does Alice's sister work these days?")
    assert first[1] in found and job[0] in found
    assert job[0] not in recalled(memory, "sister")  # a short question is not expanded
    # Asked again, and after a question whose marks were read with it: the same answers.
    assert recalled(memory, "Where does Alice's sister work these days?") == found


def test_the_hop_reads_no_marks_statement_on_postgresql(postgres_url: str, tmp_path: Path,
                                                        sent: list[str]) -> None:
    with MemorySystem.open(tmp_path / "home", config={"fermix_core": {"storage": {"url": postgres_url}}}) as memory:
        first, job = family(memory)
        sent.clear()
        assert job[0] in recalled(memory, "Where does Alice's sister work these days?")
        assert not [sql for sql in sent if "FROM message_marks WHERE message_id IN" in sql], sent
        naming = [sql for sql in sent if "k.mark IN" in sql]
        assert len(sent) == 1 + len(naming) and naming, sent  # the search, then one read per name followed
        sent.clear()
        assert first[0] in recalled(memory, "how is the family doing")  # expanded, nothing to follow
        assert len(sent) == 1, sent
