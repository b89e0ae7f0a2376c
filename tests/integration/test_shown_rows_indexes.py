"""The rows a prompt file may show are read by seeks of their own index (ADR-0060), on a new home
and on one made before the index existed, on SQLite and on PostgreSQL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import apsw
import pytest

from fermix_memory import MemorySystem
from fermix_memory.adapters.sql.queries import AGENT_RULES_SQL
from fermix_memory.adapters.sql.rows import shown_rows_sql
from fermix_memory.adapters.sqlite.migrations import MIGRATIONS, SHOWN_ROWS_INDEXES
from fermix_memory.domain.rendering import SHOWN_SECTIONS

AGENT, OWNER = "ada", "alice"
INDEXES = ("memories_agent_rules", "memories_shown")
FACTS = [("identity", "name", "Alice"), ("preference", "tea", "Green tea"), ("context", "project", "Zeppelin"),
         ("directive", "brief", "Answer briefly")]


def fill(memory: MemorySystem) -> dict[str, str]:
    memory.write_memory([{"op": "add", "category": c, "key": k, "value": v} for c, k, v in FACTS],
                        agent_id=AGENT, owner_id=OWNER, trust="operator")
    return {name: memory.resource_history(name, agent_id=AGENT, owner_id=OWNER, limit=1)[0].content
            for name in ("user_md", "memory_md")}


def sqlite_indexes(path: Path) -> list[str]:
    conn = apsw.Connection(str(path))
    try:
        return [str(r[0]) for r in conn.execute(
            "SELECT name FROM sqlite_schema WHERE type = 'index' AND name IN ('memories_shown', 'memories_agent_rules')"
            " ORDER BY name")]
    finally:
        conn.close()


def test_each_section_and_the_agent_rules_are_seeks_of_their_index(tmp_path: Path) -> None:
    with MemorySystem.open(tmp_path / "home") as memory:
        fill(memory)
    conn = apsw.Connection(str(tmp_path / "home" / "memory.db"))
    try:
        params = [p for *_, cap in SHOWN_SECTIONS for p in (AGENT, OWNER, cap)]
        sql = shown_rows_sql(tuple((t, c) for t, c, _ in SHOWN_SECTIONS))
        plan = [str(r[-1]) for r in conn.execute(f"EXPLAIN QUERY PLAN {sql}", params)]
        seeks = [step for step in plan if "USING INDEX memories_shown" in step]
        assert len(seeks) == len(SHOWN_SECTIONS), plan
        assert all("agent_id=? AND owner_id=? AND promote_target=? AND category=?" in s for s in seeks), plan
        assert not any("TEMP B-TREE" in step for step in plan), plan  # the index gives the order
        rules = [str(r[-1]) for r in conn.execute(f"EXPLAIN QUERY PLAN {AGENT_RULES_SQL}", (AGENT,))]
        assert any("USING INDEX memories_agent_rules (agent_id=?)" in step for step in rules), rules
    finally:
        conn.close()


def test_a_home_from_before_the_indexes_gets_them_and_renders_the_same(tmp_path: Path) -> None:
    with MemorySystem.open(tmp_path / "home") as memory:
        files = fill(memory)
    db = tmp_path / "home" / "memory.db"
    assert sqlite_indexes(db) == list(INDEXES)
    conn = apsw.Connection(str(db))
    try:  # as the file was before them
        conn.execute("DROP INDEX memories_shown; DROP INDEX memories_agent_rules;"
                     f" PRAGMA user_version = {MIGRATIONS.index(SHOWN_ROWS_INDEXES)}")
    finally:
        conn.close()
    with MemorySystem.open(tmp_path / "home") as memory:
        assert memory.rebuild_prompt_files(AGENT, OWNER) == []  # the same rendering: no new revision
        memory.write_memory({"op": "add", "category": "goal", "key": "german", "value": "Speak German"},
                            agent_id=AGENT, owner_id=OWNER, trust="operator")
        [user_md] = memory.resource_history("user_md", agent_id=AGENT, owner_id=OWNER, limit=1)
        assert user_md.content == files["user_md"].rstrip("\n") + "\n\n## Goals\n- german: Speak German\n"
    assert sqlite_indexes(db) == list(INDEXES)


def pg(url: str, statement: str) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        cur = conn.execute(statement)  # type: ignore[arg-type]  # the test's own SQL
        return cur.fetchall() if cur.description else []


def test_postgres_has_the_indexes_and_compares_update_times_byte_by_byte(postgres_url: str, tmp_path: Path) -> None:
    pytest.importorskip("psycopg")
    config = {"fermix_core": {"storage": {"url": postgres_url}}}
    with MemorySystem.open(tmp_path / "home", config=config) as memory:
        files = fill(memory)
    catalog = ("SELECT (SELECT collation_name FROM information_schema.columns WHERE table_name = 'memories'"
               " AND column_name = 'updated_at'), array(SELECT indexname::text FROM pg_indexes"
               " WHERE tablename = 'memories' AND indexname IN ('memories_shown', 'memories_agent_rules')"
               " ORDER BY indexname)")
    assert pg(postgres_url, catalog) == [("C", list(INDEXES))]
    # As a database of schema 6 was: the indexes gone, the column in the database's collation.
    pg(postgres_url, "DROP INDEX memories_shown; DROP INDEX memories_agent_rules;"
                     " ALTER TABLE memories ALTER COLUMN updated_at TYPE TEXT COLLATE pg_catalog.\"default\";"
                     " DELETE FROM fermix_migrations WHERE version >= 7")
    assert pg(postgres_url, catalog) == [(None, [])]
    with MemorySystem.open(tmp_path / "home", config=config) as memory:
        assert memory.rebuild_prompt_files(AGENT, OWNER) == []
        assert memory.resource_history("memory_md", agent_id=AGENT, owner_id=OWNER, limit=1)[0].content \
            == files["memory_md"]
    assert pg(postgres_url, catalog) == [("C", list(INDEXES))]
