"""A read prepared once per connection and run by libpq in one call (``prepared_rows``) returns
what the driver's general path returns for the same statement and parameters, prepares a
statement again after the session's statements were dropped, hands a parameter it does not
send back to the general path, and raises the driver's error for a statement that fails,
leaving the connection usable."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from fermix_memory.adapters.postgres.connection import PgCursor
from fermix_memory.adapters.postgres.prepared import numbered, prepared_rows
from fermix_memory.adapters.postgres.queries import history_search_sql
from fermix_memory.domain.messages import QUESTION_MARKS

psycopg = pytest.importorskip("psycopg")

ASKS = f"[{QUESTION_MARKS}]"  # what a history search binds to test a turn for a question

TYPED = ("SELECT ?::real AS score, ?::bigint, ?, ?::text IS NULL, ?::boolean, ARRAY['b', 'a', ?],"
         " ARRAY[]::text[], NULL::text, 1.5::real, 'x' ~ ?, now() IS NOT NULL")
CASES: list[tuple[Any, ...]] = [
    (0.0607927, 12, "plain", None, True, "c", ASKS),
    (-1.25e-07, -9007199254740993, "é ü \\ ' \"", "set", False, "", "x"),
    (3.4e38, 0, "", None, False, "naïve", "y"),
]

MESSAGES = """
CREATE TEMP TABLE messages (id bigint PRIMARY KEY, agent_id text, owner_id text, channel text, chat_id text,
  thread_scope text, sender text, role text, kind text, content text, metadata_json text, created_at text,
  trust text, search tsvector);
CREATE TEMP TABLE message_marks (message_id bigint, mark text);
INSERT INTO messages SELECT i, 'ada', 'alice', 'telegram', '100', '', 'alice', 'user', 'message',
  CASE WHEN i % 3 = 0 THEN 'where is the ferry ' || i || '?' ELSE 'the ferry leaves at ' || i END,
  '{}', '2026-01-01T00:00:' || lpad(i::text, 2, '0') || '+00:00', 'owner',
  to_tsvector('simple', 'tok') || to_tsvector('english', 'the ferry leaves ' || i)
  FROM generate_series(1, 40) i;
INSERT INTO message_marks SELECT i, m FROM generate_series(1, 40) i, unnest(ARRAY['n:ferry', 'd:2026-01-01']) m
  WHERE i % 2 = 0;
"""


@pytest.fixture
def conn(postgres_url: str) -> Iterator[Any]:
    with psycopg.connect(postgres_url, autocommit=True) as connection:
        yield connection


def general(conn: Any, sql: str, params: list[Any]) -> list[tuple[Any, ...]]:
    return PgCursor.reading(conn, None).execute(sql, params).fetchall()


def test_rows_are_the_general_paths_for_every_kind_of_value(conn: Any) -> None:
    for params in CASES:
        fast, slow = prepared_rows(conn, TYPED, list(params)), general(conn, TYPED, list(params))
        assert fast == slow
        assert fast is not None and [type(v) for v in fast[0]] == [type(v) for v in slow[0]]


@pytest.mark.parametrize(("after", "marks"), [(False, False), (False, True), (True, False), (True, True)])
def test_a_history_search_reads_the_same_rows_both_ways(conn: Any, after: bool, marks: bool) -> None:
    conn.execute(MESSAGES)
    sql = history_search_sql(2, 5, after=after, marks=marks)
    bound = ["tok", "ferry", "leaves", "ada", "alice", "telegram", "100", "",
             *([0.5, 30] if after else []), 12, ASKS]
    fast = prepared_rows(conn, sql, bound)
    assert fast == general(conn, sql, bound)
    assert fast
    assert any(row[15] is not None for row in fast)  # questions bring the turn after them
    if marks:
        assert any(row[-1] for row in fast)


def test_a_statement_is_prepared_again_after_the_session_dropped_them(conn: Any) -> None:
    assert prepared_rows(conn, "SELECT ? || 'b'", ["a"]) == [("ab",)]
    conn.execute("DEALLOCATE ALL")
    assert prepared_rows(conn, "SELECT ? || 'b'", ["c"]) == [("cb",)]
    assert prepared_rows(conn, "SELECT ?::int + 1", [1]) == [(2,)]
    names = [r[0] for r in conn.execute("SELECT name FROM pg_prepared_statements ORDER BY name").fetchall()]
    assert len(names) == len(set(names)) == 2


def test_other_values_and_named_placeholders_take_the_general_path(conn: Any) -> None:
    assert prepared_rows(conn, "SELECT ?", [b"bytes"]) is None
    assert prepared_rows(conn, "SELECT :name", {"name": 1}) is None
    assert numbered("SELECT ?::real, ? FROM t WHERE a = ?") == b"SELECT $1::real, $2 FROM t WHERE a = $3"


def test_a_failing_statement_raises_the_drivers_error_and_the_connection_goes_on(conn: Any) -> None:
    with pytest.raises(psycopg.errors.DivisionByZero):
        prepared_rows(conn, "SELECT 1 / ?::int", [0])
    assert prepared_rows(conn, "SELECT 1 / ?::int", [1]) == [(1,)]
    with pytest.raises(psycopg.errors.UndefinedTable):
        prepared_rows(conn, "SELECT * FROM no_such_table WHERE a = ?", [1])
    assert conn.pgconn.transaction_status == psycopg.pq.TransactionStatus.IDLE
    assert prepared_rows(conn, "SELECT ?::text", ["ok"]) == [("ok",)]
    assert prepared_rows(conn, "CREATE TEMP TABLE t AS SELECT ?::int AS a", [1]) == []
