"""The import keys on PostgreSQL are kept beside their messages by the server and read through
an index of those rows alone (ADR-0041); a database from before gets them when it is opened."""

from __future__ import annotations

import json
from pathlib import Path

from fermix_memory import MemorySystem
from tests.integration.test_postgres_store import config, sql


def line(chat: str, content: str, **extra: object) -> str:
    return json.dumps({"agent_id": "ada", "owner_id": "alice", "channel": "telegram", "chat_id": chat,
                       "role": "user", "sender": "alice", "content": content, **extra})


def keyed(url: str) -> list[tuple[object, ...]]:
    return sql(url, "SELECT position, import_key_type, import_key FROM events"
                    " WHERE import_key_type IS NOT NULL ORDER BY position")


def test_the_server_keeps_each_key_and_forgets_it_with_its_payload(postgres_url: str, tmp_path: Path) -> None:
    with MemorySystem.open(tmp_path / "home", config=config(postgres_url)) as memory:
        ids = memory.import_history([line("1", "tea", message_id="m-1"), line("2", "hi", message_id="m-2")])
        memory.append_message(agent_id="ada", owner_id="alice", conversation=("telegram", "1"), role="user",
                              sender="alice", content="typed", metadata={"fermix_import_key": 7})
        memory.append_message(agent_id="ada", owner_id="alice", conversation=("telegram", "1"), role="user",
                              sender="alice", content="plain")
        assert [(t, k) for _, t, k in keyed(postgres_url)] == [("string", "m-1"), ("string", "m-2"),
                                                               ("number", "7")]
        memory.forget_conversation("ada", ("telegram", "2"))
        assert [p for p, _, _ in keyed(postgres_url)] == [ids[0], ids[0] + 2]
        assert memory.import_history([line("1", "tea", message_id="m-1"), line("1", "seven", message_id="7")]) == []


def test_a_database_from_before_gets_the_keys_and_still_skips_what_it_imported(postgres_url: str,
                                                                              tmp_path: Path) -> None:
    lines = [line("1", "hello"), line("1", "tea", message_id="m-1"), line("2", "hi")]
    with MemorySystem.open(tmp_path / "home", config=config(postgres_url)) as memory:
        memory.import_history(lines[:2])
    sql(postgres_url, "DROP INDEX events_import_keys; ALTER TABLE events DROP COLUMN import_key_type,"
                      " DROP COLUMN import_key;"
                      # and migration 4 (vectors), which came after it
                      " DROP TABLE vector_changes, message_vectors, memory_vectors, vector_queue;"
                      " DROP FUNCTION message_vectors_changes();"
                      " DROP TRIGGER messages_vectors ON messages; DROP TRIGGER memories_vectors ON memories;"
                      " DROP FUNCTION messages_vectors(); DROP FUNCTION memories_vectors();"
                      " DELETE FROM fermix_migrations WHERE version >= 3")
    with MemorySystem.open(tmp_path / "home", config=config(postgres_url)) as memory:
        assert len(keyed(postgres_url)) == 2
        assert len(memory.import_history(lines)) == 1
        assert [m.content for m in memory.history("ada", ("telegram", "1"))] == ["hello", "tea"]
