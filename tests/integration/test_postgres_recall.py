"""Recall on PostgreSQL in one statement per search: the ranking, the rows, their snippets and
the turn after a matching question come back together (ADR-0029, "Recall round trips").

Every statement the store sends goes through ``PgCursor.execute``; these tests count the ones
sent by the test's own thread (background work has threads of its own) during one recall."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from fermix_memory import MemorySystem

AGENT = "ada"
CHAT = "telegram:100"
START = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)


@pytest.fixture
def memory(postgres_url: str, tmp_path: Path) -> Iterator[MemorySystem]:
    with MemorySystem.open(tmp_path / "home", config={"fermix_core": {"storage": {"url": postgres_url}}}) as system:
        yield system


def say(memory: MemorySystem, turns: list[tuple[str, str]], *, minute: int = 0, kind: str = "message") -> list[int]:
    return [memory.append_message(agent_id=AGENT, owner_id="alice", conversation=CHAT,
                                  role="system" if kind == "checkpoint" else "user", sender=sender, content=text,
                                  kind=kind, created_at=START + timedelta(minutes=minute + i))
            for i, (sender, text) in enumerate(turns)]


def recall(memory: MemorySystem, query: str, source: str, limit: int = 10) -> Any:
    return memory.recall(query, agent_id=AGENT, owner_id="alice", conversation=CHAT, scope="current",
                         source=source, limit=limit)


def test_a_history_recall_is_one_statement_with_snippets_and_the_reply(memory: MemorySystem,
                                                                       sent: list[str]) -> None:
    """More matching turns than the limit: the page (its best turns whole, their snippets, the
    turn after the question) still comes in one statement."""
    ids = say(memory, [("Caroline", "Did you park the campervan by the campervan shop?"),
                       ("Kwame", "Behind the old mill.")])
    others = say(memory, [("Kwame", f"The campervan needs new tyres, number {i}.") for i in range(8)], minute=5)
    memory.wait_for_background()
    sent.clear()
    found = recall(memory, "campervan park", "history", limit=3).messages
    assert len(sent) == 1, sent
    assert [(h.message.id, h.context_of) for h in found] == [(ids[0], None), (ids[1], ids[0]), (others[-1], None)]
    assert "[campervan]" in found[0].snippet and found[1].snippet == "Behind the old mill."
    sent.clear()
    assert [h.message.id for h in recall(memory, "tyres", "history", limit=3).messages] == others[:-4:-1]
    assert len(sent) == 1, sent


def test_memories_are_one_statement_and_both_sources_two(memory: MemorySystem, sent: list[str]) -> None:
    say(memory, [("alice", "The pottery class is on Thursday.")])
    stored = memory.dispatch_tool("memory_store", {"key": "hobby", "value": "pottery on Thursdays"},
                                  agent_id=AGENT, owner_id="alice", trust="operator", conversation=CHAT)
    assert stored["ok"], stored
    memory.wait_for_background()
    for source, statements in (("memories", 1), ("history", 1), ("all", 2)):
        sent.clear()
        result = recall(memory, "pottery", source)
        assert len(sent) == statements, (source, sent)
        assert len(result.ranked) == statements
    sent.clear()
    answer = memory.dispatch_tool("memory_recall", {"query": "pottery", "source": "history"},
                                  agent_id=AGENT, owner_id="alice", trust="operator", conversation=CHAT)
    assert answer["ok"] and len(answer["messages"]) == 1 and len(sent) == 1, (answer, sent)


def test_unreadable_turns_at_the_top_cost_one_more_statement_not_a_shorter_list(memory: MemorySystem,
                                                                               sent: list[str]) -> None:
    """Checkpoints whose sources are unknown match but are never shown: when they fill the first
    statement's rows, a second one reads the candidates after them."""
    say(memory, [("compactor", "kiln kiln kiln kiln, the kiln again")] * 3, kind="checkpoint")
    seen = say(memory, [("Sam", "the kiln broke"), ("alice", "a new kiln then")], minute=10)
    memory.wait_for_background()
    sent.clear()
    found = recall(memory, "kiln", "history", limit=2).messages
    assert len(sent) == 2, sent
    assert sorted(h.message.id for h in found) == seen
