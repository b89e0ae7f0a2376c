"""``history import`` skips what a conversation already holds, on every store (ADR-0012, ADR-0037)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fermix_memory import MemorySystem

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
