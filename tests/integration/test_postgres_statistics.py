"""No statistics of a person's words on PostgreSQL (schema 9): the columns that hold them are
never analysed, the columns the reads filter on are, and the planner still reads the hot
queries through their indexes. A database analysed before schema 9 keeps the statistics it had
of those columns: ``ANALYZE`` does not remove a column's row when it takes none of it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from fermix_memory import MemorySystem
from fermix_memory.adapters.postgres.migrations import UNANALYSED_COLUMNS
from fermix_memory.adapters.postgres.queries import history_search_sql
from fermix_memory.adapters.sql.scope_tokens import conversation_token, owner_token
from fermix_memory.domain.values import ConversationKey
from tests.integration.test_postgres_store import config, sql

OWNERS = 100
EACH = 1000  # messages an owner


def analysed(url: str) -> set[tuple[str, str]]:
    """The (table, column) pairs ``pg_statistic`` holds a row of."""
    return {(str(t), str(c)) for t, c in sql(url, "SELECT tablename, attname FROM pg_stats"
                                                  " WHERE schemaname = current_schema()")}


def test_no_column_of_a_persons_words_is_analysed_and_the_filtered_ones_are(postgres_url: str,
                                                                            tmp_path: Path) -> None:
    with MemorySystem.open(tmp_path / "home", config=config(postgres_url)) as memory:
        memory.append_message(agent_id="ada", owner_id="alice", conversation="telegram:1", role="user",
                              sender="alice", content="I met Wilhelmina Thistlewood on 14 March")
        memory.write_memory({"op": "add", "category": "preference", "key": "drink", "value": "Drinks tea"},
                            agent_id="ada", owner_id="alice", trust="operator")
    targets = {(str(t), str(c)): int(n) for t, c, n in sql(
        postgres_url, "SELECT attrelid::regclass::text, attname, coalesce(attstattarget, -1) FROM pg_attribute"
                      " WHERE attnum > 0 AND NOT attisdropped AND attrelid::regclass::text = ANY(ARRAY["
                      + ", ".join(f"'{t}'" for t in UNANALYSED_COLUMNS) + "])")}
    personal = {(t, c) for t, columns in UNANALYSED_COLUMNS.items() for c in columns}
    assert personal <= set(targets)
    assert {pair for pair, n in targets.items() if n == 0} == personal
    sql(postgres_url, "ANALYZE")
    stats = analysed(postgres_url)
    assert stats & personal == set()
    assert {("messages", "owner_id"), ("messages", "agent_id"), ("messages", "created_at"), ("messages", "id"),
            ("message_marks", "message_id"), ("memories", "owner_id")} <= stats


def test_analyze_keeps_the_statistics_a_database_from_before_had(postgres_url: str, tmp_path: Path) -> None:
    """The fact the ADR states: a column set to no statistics keeps the row an earlier
    ``ANALYZE`` took of it (only its owner's superuser may delete it); the migration cannot."""
    home = tmp_path / "home"
    with MemorySystem.open(home, config=config(postgres_url)) as memory:
        memory.append_message(agent_id="ada", owner_id="alice", conversation="telegram:1", role="user",
                              sender="alice", content="Quetzalcoatlus")
        memory.append_message(agent_id="ada", owner_id="alice", conversation="telegram:1", role="user",
                              sender="alice", content="Quetzalcoatlus")
    # As a database of schema 8 was: every column analysed.
    sql(postgres_url, "ALTER TABLE messages ALTER COLUMN content SET STATISTICS -1;"
                      " DELETE FROM fermix_migrations WHERE version >= 9; ANALYZE messages")
    before = sql(postgres_url, "SELECT most_common_vals::text FROM pg_stats WHERE tablename = 'messages'"
                               " AND attname = 'content'")
    assert before == [("{Quetzalcoatlus}",)]
    with MemorySystem.open(home, config=config(postgres_url)):
        pass  # migrated to schema 9
    assert sql(postgres_url, "SELECT attstattarget FROM pg_attribute WHERE attrelid = 'messages'::regclass"
                             " AND attname = 'content'") == [(0,)]
    sql(postgres_url, "ANALYZE messages")
    assert sql(postgres_url, "SELECT most_common_vals::text FROM pg_stats WHERE tablename = 'messages'"
                             " AND attname = 'content'") == before
    with MemorySystem.open(home, config=config(postgres_url)) as memory:  # an erasure says so
        [remains] = memory.forget_owner("alice").remains
    assert "messages.content" in remains and "pg_statistic" in remains
    # What it tells a superuser to do removes them.
    sql(postgres_url, "DELETE FROM pg_statistic WHERE starelid = 'messages'::regclass AND staattnum = (SELECT"
                      " attnum FROM pg_attribute WHERE attrelid = 'messages'::regclass AND attname = 'content')")
    sql(postgres_url, "VACUUM FULL pg_statistic")
    with MemorySystem.open(home, config=config(postgres_url)) as memory:
        assert memory.forget_owner("alice").remains == []


def _fill(url: str) -> None:
    """``OWNERS * EACH`` messages of agent ada, each with a day's mark and a name's mark."""
    owners = [f"o{i}" for i in range(OWNERS)]
    tokens = [f"{owner_token('ada', o)} {conversation_token('ada', o, ConversationKey('telegram', o, ''))}"
              for o in owners]
    sql(url, "INSERT INTO messages(id, agent_id, owner_id, channel, chat_id, sender, role, kind, content,"
             " created_at, scope_tokens)"
             f" SELECT o.n * {EACH} + g, 'ada', o.owner, 'telegram', o.owner, o.owner, 'user', 'text',"
             " 'about word' || (g % 97) || ' and thing' || (g % 13) || ' said ' || g,"
             " '2024-01-01T00:00:00+00:00'::timestamptz + g * interval '1 hour', o.token"
             f" FROM unnest(ARRAY{owners}::text[], ARRAY{tokens}::text[]) WITH ORDINALITY o(owner, token, n),"
             f" generate_series(1, {EACH}) g")
    sql(url, "INSERT INTO message_marks(message_id, mark)"
             " SELECT id, 'd:' || (date '2024-01-01' + (id % 700)::int) FROM messages"
             " UNION ALL SELECT id, 'e:name' || (id % 3001) FROM messages")
    sql(url, "ANALYZE")


def plan(url: str, statement: str, params: list[Any]) -> str:
    import psycopg

    from fermix_memory.adapters.postgres.connection import PgCursor

    with psycopg.connect(url, autocommit=True) as conn:
        return "\n".join(str(r[0]) for r in PgCursor(conn).execute("EXPLAIN " + statement, params).fetchall())


def _plans(url: str) -> list[str]:
    """The indexes (and tables scanned whole) of the hot reads' plans: marks by day and by name,
    an owner's history search."""
    statements: list[tuple[str, list[Any]]] = [
        ("SELECT message_id FROM message_marks WHERE mark >= ? AND mark <= ?", ["d:2024-03-01", "d:2024-03-02"]),
        ("SELECT message_id FROM message_marks WHERE mark IN (?, ?)", ["e:name7", "e:name8"]),
        (history_search_sql(1, 2), [owner_token("ada", "o3"), "word5", "ada", "o3", 5, "[?]"])]
    scans = r"(?:using|Index Scan on|Seq Scan on) (\w+)"
    return [" ".join(sorted(set(re.findall(scans, plan(url, statement, params))))) for statement, params in statements]


def test_the_hot_reads_use_their_indexes_as_they_did_with_those_statistics(postgres_url: str) -> None:
    """Marks read by day and by name seek their index; a history search on a large table reads
    the text's index (a small one is scanned: ``queries.history_search_sql``). The search's words are a
    parameter of a join, so its estimate never used the text's statistics."""
    _fill(postgres_url)
    without = _plans(postgres_url)
    assert without[:2] == ["message_marks_by_mark", "message_marks_by_mark"], without
    assert "messages_search" in without[2].split() and "messages" not in without[2].split(), without
    sql(postgres_url, "ALTER TABLE message_marks ALTER COLUMN mark SET STATISTICS -1;"
                      " ALTER TABLE messages ALTER COLUMN content SET STATISTICS -1,"
                      " ALTER COLUMN search SET STATISTICS -1; ANALYZE message_marks, messages")
    assert _plans(postgres_url) == without
