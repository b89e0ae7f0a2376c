"""A column a partial index filters on (scope type, category, promote target) is compared with a
literal written into the SQL, never a bound value (ADR-0069); the literal comes only from the enum:
any other value is refused before a statement is built or run."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import apsw
import pytest

from fermix_memory import MemorySystem
from fermix_memory.adapters.sql.rows import shown_rows_sql
from fermix_memory.adapters.sql.scope_sql import enum_literal, scope_sql
from fermix_memory.adapters.sqlite.queries import SqliteQueries
from fermix_memory.domain.scopes import MemoryFilter
from fermix_memory.domain.values import Category, PromoteTarget, ScopeType

HOSTILE = ["owner' OR '1'='1", "OWNER", "owner ", "", "agent'--", 7, None]


@pytest.mark.parametrize("value", HOSTILE)
def test_a_value_outside_the_enum_is_no_literal(value: object) -> None:
    with pytest.raises(ValueError):
        enum_literal(ScopeType, value)


def test_every_enum_value_is_its_own_quoted_literal() -> None:
    for kind in (ScopeType, Category, PromoteTarget):
        for member in kind:
            assert enum_literal(kind, member) == enum_literal(kind, member.value) == f"'{member.value}'"


def test_scope_sql_writes_the_scope_types_and_binds_the_rest() -> None:
    where = MemoryFilter(agent_id="ada", owner_id="o'brien",
                         scopes=((ScopeType.OWNER, "o'brien"), (ScopeType.CONVERSATION, None)))
    sql, params = scope_sql(where, "m")
    assert "m.scope_type = 'owner' AND m.scope_id = ?" in sql and "m.scope_type = 'conversation'" in sql
    assert params == ["ada", "o'brien", "o'brien"]  # host text only ever bound


@pytest.mark.parametrize("value", HOSTILE)
def test_scope_sql_refuses_a_scope_type_outside_the_enum(value: object) -> None:
    where = MemoryFilter(agent_id="ada", owner_id="alice", scopes=((value, None),))  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        scope_sql(where)


@pytest.mark.parametrize("section", [("user_md", "identity' OR 1=1 --"), ("USER_MD", "identity"), ("user_md", "")])
def test_shown_rows_sql_refuses_a_section_outside_the_enums(section: tuple[str, str]) -> None:
    with pytest.raises(ValueError):
        shown_rows_sql((("memory_md", "directive"), section))


@pytest.fixture
def traced(tmp_path: Path) -> Iterator[tuple[SqliteQueries, list[str]]]:
    """Queries on a real home's file, every statement it runs recorded."""
    with MemorySystem.open(tmp_path / "home") as memory:
        memory.write_memory({"op": "add", "category": "context", "key": "k", "value": "v"},
                            agent_id="ada", owner_id="alice", writer="tool", trust="guest",
                            conversation={"channel": "cli", "chat_id": "c1"})
    conn = apsw.Connection(str(tmp_path / "home" / "memory.db"))
    ran: list[str] = []
    conn.exec_trace = lambda _cursor, sql, _bindings: ran.append(sql) is None
    try:
        yield SqliteQueries(lambda: conn), ran
    finally:
        conn.close()


@pytest.mark.parametrize(("scope_type", "category"), [("conversation' OR 1=1 --", None), ("job ", None),
                                                      ("conversation", "context' --"), ("conversation", "CONTEXT")])
def test_memories_under_refuses_before_any_sql(traced: tuple[SqliteQueries, list[str]], scope_type: str,
                                               category: str | None) -> None:
    queries, ran = traced
    with pytest.raises(ValueError):
        queries.memories_under("ada", "alice", scope_type, [""], limit=10, unshown_category=category)
    assert ran == []


def test_memories_under_reads_with_the_literals(traced: tuple[SqliteQueries, list[str]]) -> None:
    queries, ran = traced
    rows = queries.memories_under("ada", "alice", "conversation", [""], limit=10, unshown_category="context")
    assert [(r.key, r.value) for r in rows] == [("k", "v")]
    assert "scope_type = 'conversation'" in ran[-1] and "category = 'context'" in ran[-1]
