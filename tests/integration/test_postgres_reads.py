"""A read on PostgreSQL runs on a pooled connection whose driver cursor is kept for its next
reads: consecutive reads of different statements get their own rows, a read that fails leaves
the connection usable, and a write in between (its own cursors, in a pipeline) changes nothing."""

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


@pytest.fixture
def opened(postgres_url: str, tmp_path: Path) -> Iterator[tuple[MemorySystem, Any]]:
    with one_connection_memory(postgres_url, tmp_path / "home") as opened_memory:
        yield opened_memory


def append(memory: MemorySystem, text: str) -> int:
    return memory.append_message(agent_id=AGENT, owner_id="alice", conversation=CHAT, role="user",
                                 sender="alice", content=text)


def test_reads_on_one_connection_get_their_own_rows(opened: tuple[MemorySystem, Any]) -> None:
    memory, store = opened
    first = append(memory, "the lighthouse keeper")
    assert store.rows("SELECT ?::int + 1", (1,), prepare=True) == [(2,)]
    assert store.rows("SELECT content FROM messages WHERE id = ?", (first,)) == [("the lighthouse keeper",)]
    assert store.rows("SELECT id FROM messages WHERE id < 0") == []
    assert store.rows("SELECT ?::int + 1", (41,), prepare=True) == [(42,)]


def test_a_failed_read_leaves_the_connection_usable(opened: tuple[MemorySystem, Any]) -> None:
    memory, store = opened
    with pytest.raises(StorageError, match="no_such_table"):
        store.rows("SELECT * FROM no_such_table")
    with pytest.raises(StorageError):
        store.rows("SELECT 1 / (? - 1)", (1,), prepare=True)
    second = append(memory, "a second lighthouse")  # a write on the same connection, after the failures
    assert store.rows("SELECT content FROM messages WHERE id = ?", (second,), prepare=True) == [
        ("a second lighthouse",)]
    found = memory.recall("lighthouse", agent_id=AGENT, owner_id="alice", conversation=CHAT, scope="current",
                          source="history")
    assert [hit.message.content for hit in found.ranked] == [hit.message.content for hit in found.messages]
    assert sorted(hit.message.content for hit in found.messages) == ["a second lighthouse"]
