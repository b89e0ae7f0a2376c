"""``history import`` skips what a conversation already holds, on every store (ADR-0012, ADR-0037)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import apsw
import pytest

from fermix_memory import MemorySystem
from fermix_memory.adapters.sqlite.import_keys import SQLITE_IMPORT_KEY, SQLITE_IMPORT_KEYS
from fermix_memory.adapters.sqlite.migrations import IMPORT_KEYED, IMPORT_KEYS_INDEX, MIGRATIONS

pytestmark = pytest.mark.usefixtures("every_store")

AGENT, OWNER = "ada", "alice"


def line(chat: str, content: str, **extra: Any) -> str:
    return json.dumps({"agent_id": AGENT, "owner_id": OWNER, "channel": "telegram", "chat_id": chat, "role": "user",
                       "sender": OWNER, "content": content, **extra})


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[MemorySystem]:
    with MemorySystem.open(tmp_path / "home") as system:
        yield system


def contents(memory: MemorySystem, chat: str) -> list[str]:
    return [m.content for m in memory.history(AGENT, ("telegram", chat), limit=100)]


def test_a_file_imported_in_parts_and_again_adds_each_message_once(memory: MemorySystem) -> None:
    lines = [line("1", "hello"), line("2", "hi"), line("1", "hello"), line("1", "tea", message_id="m-1"),
             line("2", "coffee", message_id="m-2")]
    assert len(memory.import_history(lines[:2])) == 2
    assert len(memory.import_history(lines[:4])) == 2  # the second "hello" and "tea" are new
    assert memory.import_history(lines) != [] and memory.import_history(lines) == []
    assert contents(memory, "1") == ["hello", "hello", "tea"] and contents(memory, "2") == ["hi", "coffee"]


def test_a_forgotten_conversation_takes_its_lines_again_and_the_others_stay_skipped(memory: MemorySystem) -> None:
    lines = [line("1", "hello"), line("2", "hi", message_id="m-2")]
    memory.import_history(lines)
    memory.forget_conversation(AGENT, ("telegram", "1"))
    assert len(memory.import_history(lines)) == 1
    assert contents(memory, "1") == ["hello"] and contents(memory, "2") == ["hi"]


def test_a_key_given_in_an_appended_messages_metadata_counts_as_imported(memory: MemorySystem) -> None:
    memory.append_message(agent_id=AGENT, owner_id=OWNER, conversation=("telegram", "1"), role="user", sender=OWNER,
                          content="typed", metadata={"fermix_import_key": 7})
    assert memory.import_history([line("1", "imported", message_id="7"), line("1", "new", message_id="8")]) != []
    assert contents(memory, "1") == ["typed", "new"]


def test_only_a_key_at_the_top_of_the_metadata_counts_and_any_json_value_reads_as_before(
        memory: MemorySystem) -> None:
    for n, metadata in enumerate([{"x": {"fermix_import_key": "a"}}, {"fermix_import_key": None},
                                  {"fermix_import_key": True}, {"fermix_import_key": [1]}]):
        memory.append_message(agent_id=AGENT, owner_id=OWNER, conversation=("telegram", "1"), role="user",
                              sender=OWNER, content=f"typed {n}", metadata=metadata)
    lines = [line("1", c, message_id=k) for c, k in [("a", "a"), ("none", "None"), ("true", "True"), ("list", "[1]")]]
    assert len(memory.import_history(lines)) == 1
    assert contents(memory, "1")[-1] == "a"


def sqlite_db(memory: MemorySystem) -> apsw.Connection:
    return apsw.Connection(str(memory.home / "memory.db"))


@pytest.mark.sqlite_only("the index of import keys in the SQLite file")
def test_the_keys_are_read_from_the_index_of_import_keys(memory: MemorySystem) -> None:
    memory.import_history([line("1", "hello")])
    conn = sqlite_db(memory)
    try:
        plan = " ".join(str(r) for r in conn.execute(f"EXPLAIN QUERY PLAN {SQLITE_IMPORT_KEYS}", ("s",)))
    finally:
        conn.close()
    assert "events_import_keys" in plan


@pytest.mark.sqlite_only("the index of import keys in the SQLite file")
def test_one_key_is_found_by_a_seek_of_the_index_not_a_walk_over_the_conversation(memory: MemorySystem) -> None:
    memory.import_history([line("1", "hello")])
    conn = sqlite_db(memory)
    try:
        plan = [str(r[-1]) for r in conn.execute(f"EXPLAIN QUERY PLAN {SQLITE_IMPORT_KEY}", ("s", "k", "s"))]
    finally:
        conn.close()
    seeks = [step for step in plan if "events_import_keys" in step]
    # both halves seek by stream and key type; the string half by the key itself as well
    assert len(seeks) == 2 and all("stream=? AND <expr>" in step for step in seeks), plan
    assert any("stream=? AND <expr>=? AND <expr>=?" in step for step in seeks), plan


@pytest.mark.sqlite_only("a SQLite file of the schema before the index of import keys")
def test_a_home_from_before_the_index_gets_it_and_still_skips_what_it_imported(tmp_path: Path) -> None:
    lines = [line("1", "hello"), line("1", "tea", message_id="m-1"), line("2", "hi")]
    with MemorySystem.open(tmp_path / "home") as memory:
        memory.import_history(lines[:2])
        conn = sqlite_db(memory)
    try:  # as the file was before the index existed
        conn.execute("DROP INDEX events_import_keys")
        # and migrations 8 (vectors) and 9 (their change count), which came after it
        conn.execute("DROP TABLE vector_changes;"
                     " DROP TABLE message_vectors; DROP TABLE memory_vectors; DROP TABLE vector_queue;"
                     " DROP TABLE vector_marks; DROP TRIGGER IF EXISTS memories_vectors_insert;"
                     " DROP TRIGGER messages_vectors_update; DROP TRIGGER messages_vectors_delete;"
                     " DROP TRIGGER memories_vectors_update; DROP TRIGGER memories_vectors_delete;")
        conn.execute(f"PRAGMA user_version = {MIGRATIONS.index(IMPORT_KEYS_INDEX)}")  # the version before it
    finally:
        conn.close()
    with MemorySystem.open(tmp_path / "home") as memory:
        assert len(memory.import_history(lines)) == 1
        assert contents(memory, "1") == ["hello", "tea"] and contents(memory, "2") == ["hi"]
        conn = sqlite_db(memory)
        try:
            assert conn.execute("SELECT count(*) FROM events INDEXED BY events_import_keys"
                                f" WHERE {IMPORT_KEYED}").fetchall() == [(3,)]
        finally:
            conn.close()
