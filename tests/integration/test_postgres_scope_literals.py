"""On PostgreSQL too, a memory recall writes its scope types out (ADR-0069) and binds the rest: the
recalls of every conversation of an owner share one server-side prepared statement (ADR-0064)."""

from __future__ import annotations

from pathlib import Path

from tests.postgres_server import one_connection_memory

AGENT = "ada"
PREPARED = "SELECT statement FROM pg_prepared_statements"


def test_recalls_of_two_conversations_share_one_prepared_statement(postgres_url: str, tmp_path: Path) -> None:
    with one_connection_memory(postgres_url, tmp_path / "home") as (memory, store):
        chats = ["telegram:1", "telegram:2"]
        for chat in chats:
            stored = memory.dispatch_tool("memory_store", {"key": "boat", "value": f"ferry from {chat}"},
                                          agent_id=AGENT, owner_id="alice", trust="operator", conversation=chat)
            assert stored["ok"], stored
        memory.wait_for_background()
        for chat in chats:
            found = memory.recall("ferry", agent_id=AGENT, owner_id="alice", conversation=chat, source="memories")
            assert [h.memory.value for h in found.memories] == [f"ferry from {chat}"]
        searches = [str(r[0]) for r in store.rows(PREPARED) if "ts_rank" in str(r[0])]
        assert len(searches) == 1, searches
        assert "m.scope_type = 'owner'" in searches[0] and "m.scope_type = 'conversation'" in searches[0]
