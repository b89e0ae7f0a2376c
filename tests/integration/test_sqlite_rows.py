"""Memory rows are read by column name: the one column list is the ``Memory`` fields, and
every one of them is a column of the ``memories`` table."""

from __future__ import annotations

from pathlib import Path

import attrs

from fermix_memory.adapters.sqlite.event_store import SqliteEventStore
from fermix_memory.adapters.sqlite.rows import MEMORY_FIELDS, memory_columns
from fermix_memory.domain.memory import Memory


def test_the_memory_columns_are_named_once_by_the_memory_fields(tmp_path: Path) -> None:
    store = SqliteEventStore(tmp_path / "memory.db")
    try:
        table = {row[1] for row in store.reader().execute("PRAGMA table_info(memories)").fetchall()}
    finally:
        store.close()
    assert tuple(f.name for f in attrs.fields(Memory)) == MEMORY_FIELDS
    assert set(MEMORY_FIELDS) <= table
    assert memory_columns("m").split(", ")[:2] == ["m.id", "m.agent_id"]
