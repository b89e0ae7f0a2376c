"""Recall's statements on PostgreSQL are server-side prepared from their first run on a
connection (planned once per connection and shape), and stay usable after a write whose
pipeline the server aborted on the same connection (nothing is prepared inside a pipeline)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fermix_memory import MemorySystem
from fermix_memory.application.errors import StorageError
from tests.postgres_server import one_connection_memory

AGENT = "ada"
CHAT = "telegram:100"
PREPARED = "SELECT statement FROM pg_prepared_statements"


@pytest.fixture
def opened(postgres_url: str, tmp_path: Path) -> Iterator[tuple[MemorySystem, Any]]:
    with one_connection_memory(postgres_url, tmp_path / "home") as opened_memory:
        yield opened_memory


def recall(memory: MemorySystem, query: str, source: str = "history") -> list[str]:
    found = memory.recall(query, agent_id=AGENT, owner_id="alice", conversation=CHAT, scope="current",
                          source=source)
    return sorted(hit.message.content for hit in found.messages)


def searches(store: Any) -> list[str]:
    return [row[0] for row in store.rows(PREPARED) if "ts_rank" in row[0]]


def test_a_recall_statement_is_prepared_at_its_first_run(opened: tuple[MemorySystem, Any]) -> None:
    memory, store = opened
    memory.append_message(agent_id=AGENT, owner_id="alice", conversation=CHAT, role="user", sender="alice",
                          content="the harbour ferry leaves at noon")
    assert searches(store) == []
    assert recall(memory, "ferry") == ["the harbour ferry leaves at noon"]
    assert len(searches(store)) == 1
    assert recall(memory, "harbour") == ["the harbour ferry leaves at noon"]
    assert len(searches(store)) == 1  # the same shape: the same statement
    stored = memory.dispatch_tool("memory_store", {"key": "boat", "value": "ferry at noon"}, agent_id=AGENT,
                                  owner_id="alice", trust="operator", conversation=CHAT)
    assert stored["ok"], stored
    memory.wait_for_background()
    found = memory.recall("ferry", agent_id=AGENT, owner_id="alice", conversation=CHAT, source="memories")
    assert [h.memory.value for h in found.memories] == ["ferry at noon"]
    assert len(searches(store)) == 2


def test_prepared_recalls_survive_a_write_the_server_aborted(opened: tuple[MemorySystem, Any]) -> None:
    memory, store = opened
    memory.append_message(agent_id=AGENT, owner_id="alice", conversation=CHAT, role="user", sender="alice",
                          content="the lighthouse keeper waves")
    assert recall(memory, "lighthouse") == ["the lighthouse keeper waves"]

    def failing(tx: Any) -> None:
        tx.cursor.execute("SELECT 1 / 0").fetchall()  # the server aborts the write's pipeline

    for _ in range(2):
        with pytest.raises(StorageError):
            store.write(failing)
        assert recall(memory, "lighthouse") == ["the lighthouse keeper waves"]
        assert recall(memory, "keeper waves") == ["the lighthouse keeper waves"]
    memory.append_message(agent_id=AGENT, owner_id="alice", conversation=CHAT, role="user", sender="alice",
                          content="the keeper sleeps")
    assert recall(memory, "keeper") == ["the keeper sleeps", "the lighthouse keeper waves"]


def test_a_recall_statement_runs_in_one_libpq_call_of_its_own(opened: tuple[MemorySystem, Any]) -> None:
    """Recall's statements take ``prepared_rows`` (named by it, not by the driver's cache), and
    a statement the driver prepared keeps its own name beside them."""
    memory, store = opened
    memory.append_message(agent_id=AGENT, owner_id="alice", conversation=CHAT, role="user", sender="alice",
                          content="is the harbour ferry late?")
    memory.append_message(agent_id=AGENT, owner_id="alice", conversation=CHAT, role="assistant", sender=AGENT,
                          content="it leaves at noon")
    assert recall(memory, "ferry") == ["is the harbour ferry late?", "it leaves at noon"]
    named = store.rows("SELECT name, statement FROM pg_prepared_statements")
    recall_names = [name for name, statement in named if "ts_rank" in statement]
    assert len(recall_names) == 1 and recall_names[0].startswith("_fermix_")
    assert all(name.startswith(("_fermix_", "_pg3_")) for name, _ in named)
