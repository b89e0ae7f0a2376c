"""Prompt-file revisions are recorded in the same transaction as the memory change that caused
them: no second write transaction after the commit, no file rewrite when the text is unchanged."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from fermix_memory import MemorySystem
from fermix_memory.adapters.prompt_files_fs import PromptFileFolder
from fermix_memory.adapters.sqlite.event_store import SqliteEventStore

AGENT, OWNER, CONV = "ada", "alice", "telegram:42"


class Counts:
    def __init__(self) -> None:
        self.transactions = 0
        self.file_writes = 0


@pytest.fixture
def counts(monkeypatch: pytest.MonkeyPatch) -> Counts:
    counted = Counts()
    real_write, real_file_write = SqliteEventStore.write, PromptFileFolder.write

    def write(self: SqliteEventStore, work: Callable[[Any], Any], **options: Any) -> Any:
        if not options.get("upkeep"):  # the background upkeep's own writes (ADR-0091) are not the change's
            counted.transactions += 1
        return real_write(self, work, **options)

    def file_write(self: PromptFileFolder, *args: Any) -> Any:
        counted.file_writes += 1
        return real_file_write(self, *args)

    monkeypatch.setattr(SqliteEventStore, "write", write)
    monkeypatch.setattr(PromptFileFolder, "write", file_write)
    return counted


@pytest.fixture
def memory(tmp_path: Path) -> Iterator[MemorySystem]:
    with MemorySystem.open(tmp_path / "home") as m:
        yield m


def add(m: MemorySystem, category: str, key: str, value: str, **kw: Any) -> None:
    [outcome] = m.write_memory({"op": "add", "category": category, "key": key, "value": value}, agent_id=AGENT,
                               owner_id=OWNER, trust="operator", **kw)
    assert outcome.status in ("added", "replaced"), outcome


def test_a_memory_change_and_its_prompt_file_revision_are_one_commit(memory: MemorySystem, counts: Counts) -> None:
    add(memory, "identity", "city", "Lives in Berlin", writer="reviewer")
    assert counts.transactions == 1  # the row and the USER.md revision: one write transaction
    assert counts.file_writes == 1
    [revision] = memory.resource_history("user_md", agent_id=AGENT, owner_id=OWNER)
    assert "Lives in Berlin" in revision.content
    path = memory.prompt_file(AGENT, OWNER, "user_md")
    assert path.read_text(encoding="utf-8") == revision.content


def test_a_memory_change_that_renders_nothing_new_opens_no_second_transaction_and_writes_no_file(
        memory: MemorySystem, counts: Counts) -> None:
    add(memory, "identity", "name", "Alice", writer="reviewer")
    before = (counts.transactions, counts.file_writes)
    # A tool's row is conversation-scoped: it never renders into a prompt file.
    add(memory, "identity", "nickname", "Ali", writer="tool", conversation=CONV)
    assert (counts.transactions, counts.file_writes) == (before[0] + 1, before[1])
    assert [r.revision for r in memory.resource_history("user_md", agent_id=AGENT, owner_id=OWNER)] == [1]


def test_a_restore_records_its_revision_in_its_own_commit(memory: MemorySystem, counts: Counts) -> None:
    add(memory, "identity", "city", "Lives in Berlin", writer="reviewer")
    [row] = memory.memories(agent_id=AGENT, owner_id=OWNER)
    [archived] = memory.write_memory({"op": "archive", "id": row.id, "reason": "moved"}, agent_id=AGENT,
                                     owner_id=OWNER, writer="reviewer", trust="operator")
    assert archived.status == "archived"
    before = counts.transactions
    memory.restore(row.id, by="test")
    assert counts.transactions == before + 1
    history = memory.resource_history("user_md", agent_id=AGENT, owner_id=OWNER)
    assert [r.revision for r in reversed(history)] == [1, 2, 3]
    assert "Lives in Berlin" in history[0].content
    path = memory.prompt_file(AGENT, OWNER, "user_md")
    assert path.read_text(encoding="utf-8") == history[0].content
