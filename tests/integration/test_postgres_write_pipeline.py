"""A write on PostgreSQL queues its statements in libpq's pipeline itself (ADR-0099): it makes no
driver cursor, what it reads (heads, stream versions, positions) is its own answer, the log it
appends is the log a fresh connection appends for the same messages, every kind of parameter
arrives as the driver's own path would write it, a batch larger than the sockets' buffers goes
through, and statements the session dropped meanwhile are prepared again."""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from tests.postgres_server import one_connection_memory

CHATS = ("telegram:1", "telegram:2", "telegram:3")


def _append_rounds(memory: Any, rounds: range) -> None:
    for n in rounds:
        for chat in CHATS:
            memory.append_message(agent_id="ada", owner_id="alice", conversation=chat, role="user",
                                  sender="alice", content=f"round {n} in {chat} on Monday with Mei")


def _log(store: Any) -> list[tuple[Any, ...]]:
    return [tuple(row) for row in store.rows("SELECT position, stream, version, kind FROM events ORDER BY position")]


@pytest.mark.parametrize("chains", [1, 4])
def test_writes_make_no_driver_cursor_and_append_what_fresh_connections_append(
        postgres_server: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chains: int) -> None:
    import psycopg

    made: list[int] = []
    fresh = psycopg.Connection.cursor

    def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        made.append(1)
        return fresh(self, *args, **kwargs)

    with one_connection_memory(postgres_server.fresh_database(), tmp_path / "kept", chains=chains) as (memory, store):
        _append_rounds(memory, range(2))  # the connection's first writes prepare its statements
        monkeypatch.setattr(psycopg.Connection, "cursor", counted)
        _append_rounds(memory, range(2, 8))
        monkeypatch.setattr(psycopg.Connection, "cursor", fresh)
        kept = _log(store)
        assert memory.verify().ok
    assert not made, f"{len(made)} cursors made by writes"
    # The same messages, each write on a new connection.
    url = postgres_server.fresh_database()
    for n in range(8):
        with one_connection_memory(url, tmp_path / f"fresh-{n}", chains=chains) as (memory, store):
            _append_rounds(memory, range(n, n + 1))
            anew = _log(store)
            assert memory.verify().ok
    streams = sorted({s for _, s, _, _ in kept})
    assert [(s, v, k) for _, s, v, k in kept] == [(s, v, k) for _, s, v, k in anew]
    for stream in streams:
        versions = [v for _, s, v, _ in kept if s == stream]
        assert versions == list(range(1, len(versions) + 1))
    assert [p for p, *_ in kept] == sorted({p for p, *_ in kept})


@pytest.fixture
def conn(postgres_server: Any) -> Iterator[Any]:
    import psycopg

    with psycopg.connect(postgres_server.fresh_database(), autocommit=True) as connection:
        yield connection


KINDS = "(t TEXT, i BIGINT, f DOUBLE PRECISION, b BOOLEAN, y BYTEA, d TIMESTAMPTZ, n NUMERIC, j JSONB)"
VALUES: list[tuple[Any, ...]] = [
    ("plain", 1, 1.5, True, b"\x00\x01\xff", datetime.datetime(2026, 1, 2, 3, 4, 5, tzinfo=datetime.UTC),
     Decimal("1.25"), None),
    ("ünïcödé ✓ 'quoted' \\ back", -2**62, -0.0, False, bytearray(b""), None, None, None),
    ("", 0, float("inf"), None, memoryview(b"view"), None, Decimal("-7"), None),
    (None, None, float("-inf"), None, None, None, None, None),
    ("$1 ? :name %s", 2**63 - 1, 1e-300, True, b"x" * 70_000, None, None, None),
]


def test_every_kind_of_parameter_is_written_as_the_drivers_own_path_writes_it(conn: Any) -> None:
    from fermix_memory.adapters.postgres.connection import PgCursor
    from fermix_memory.adapters.postgres.write_pipeline import WritePipeline

    conn.execute(f"CREATE TABLE ours{KINDS}")
    conn.execute(f"CREATE TABLE theirs{KINDS}")
    columns = "t, i, f, b, y, d, n"
    for row in VALUES:
        conn.execute(f"INSERT INTO theirs({columns}) VALUES (%s, %s, %s, %s, %s, %s, %s)", row[:7])
    with WritePipeline(conn) as pipeline:
        cursor = PgCursor(conn, pipeline)
        cursor.execute("BEGIN")
        for row in VALUES:
            cursor.execute(f"INSERT INTO ours({columns}) VALUES (?, ?, ?, ?, ?, ?, ?)", row[:7])
        named = cursor.cursor().execute("INSERT INTO ours(t, i) VALUES (:text, :number), (:text, :number + 1)",
                                        {"number": 40, "text": "named"})
        assert named.changes() == 2
        cursor.execute("COMMIT")
    conn.execute("INSERT INTO theirs(t, i) VALUES ('named', 40), ('named', 41)")
    order = f"SELECT {columns} FROM {{}} ORDER BY t NULLS FIRST, i NULLS FIRST"
    assert conn.execute(order.format("ours")).fetchall() == conn.execute(order.format("theirs")).fetchall()


def test_a_batch_larger_than_the_sockets_buffers_goes_through(conn: Any) -> None:
    from fermix_memory.adapters.postgres.connection import PgCursor
    from fermix_memory.adapters.postgres.write_pipeline import WritePipeline

    conn.execute("CREATE TABLE big(id BIGINT PRIMARY KEY, body TEXT)")
    body = "the lighthouse keeper waves " * 300  # ~8 kB a row, ~24 MB in all
    with WritePipeline(conn) as pipeline:
        cursor = PgCursor(conn, pipeline)
        cursor.execute("BEGIN")
        cursor.executemany("INSERT INTO big VALUES (?, ?) RETURNING id", ((i, body) for i in range(3000)))
        assert cursor.fetchall() == [(2999,)]
        cursor.execute("COMMIT")
    assert conn.execute("SELECT count(*), min(length(body)) FROM big").fetchall() == [(3000, len(body))]


def test_a_failed_statement_raises_the_drivers_error_and_leaves_the_connection_clean(conn: Any) -> None:
    import psycopg
    from psycopg import errors

    from fermix_memory.adapters.postgres.connection import PgCursor
    from fermix_memory.adapters.postgres.transaction import undo
    from fermix_memory.adapters.postgres.write_pipeline import WritePipeline

    conn.execute("CREATE TABLE once(id BIGINT PRIMARY KEY)")
    with pytest.raises(errors.UniqueViolation, match="once_pkey"), WritePipeline(conn) as pipeline:
        cursor = PgCursor(conn, pipeline)
        cursor.execute("BEGIN")
        cursor.execute("INSERT INTO once VALUES (?)", (1,))
        skipped = cursor.cursor().execute("INSERT INTO once VALUES (?)", (1,))
        cursor.cursor().execute("INSERT INTO once VALUES (?)", (2,))
        cursor.execute("COMMIT")
    assert skipped.result() is not None and skipped.result().status == psycopg.pq.ExecStatus.FATAL_ERROR
    undo(conn)
    assert conn.execute("SELECT count(*) FROM once").fetchall() == [(0,)]  # nothing of it applied
    # A failure of the caller's between statements.
    with pytest.raises(RuntimeError, match="midway"), WritePipeline(conn) as pipeline:
        PgCursor(conn, pipeline).execute("BEGIN")
        PgCursor(conn, pipeline).execute("INSERT INTO once VALUES (?)", (3,))
        raise RuntimeError("midway")
    undo(conn)
    conn.execute("INSERT INTO once VALUES (4)")
    assert conn.execute("SELECT id FROM once").fetchall() == [(4,)]


def test_statements_the_session_dropped_are_prepared_again(postgres_server: Any, tmp_path: Path) -> None:
    with one_connection_memory(postgres_server.fresh_database(), tmp_path / "home") as (memory, store):
        _append_rounds(memory, range(2))
        with store.connection("dropping the session's statements") as connection:
            connection.execute("DEALLOCATE ALL")
        _append_rounds(memory, range(2, 4))  # the first write meets a dropped statement and runs again
        versions = [v for _, s, v, _ in _log(store) if s.startswith("conversation/")]
        assert sorted(versions) == sorted([n for _ in CHATS for n in range(1, 5)])
        assert memory.verify().ok


def test_a_connection_used_by_writes_and_reads_is_freed_when_dropped(postgres_server: Any) -> None:
    """What is kept with a connection (its read cursor, its statements' names) goes with it: a
    connection the pool drops is freed."""
    import gc
    import weakref

    import psycopg

    from fermix_memory.adapters.postgres.connection import PgCursor
    from fermix_memory.adapters.postgres.write_pipeline import WritePipeline

    conn = psycopg.connect(postgres_server.url(), autocommit=True)
    assert PgCursor.reading(conn, None).execute("SELECT 1").fetchall() == [(1,)]
    assert PgCursor.reading(conn, True).execute("SELECT ? + 1", (1,)).fetchall() == [(2,)]
    for _ in range(2):  # the pipeline kept with the connection, used again
        with WritePipeline.on(conn) as pipeline:
            assert PgCursor(conn, pipeline).execute("SELECT ?::int * 2", (2,)).fetchall() == [(4,)]
    assert WritePipeline.on(conn) is pipeline
    gone = weakref.ref(conn)
    conn.close()
    del conn, pipeline
    gc.collect()
    assert gone() is None


ORDERED = """
CREATE TABLE seen(n BIGSERIAL PRIMARY KEY, id BIGINT, body TEXT);
CREATE TABLE rows_in(id BIGINT PRIMARY KEY, body TEXT);
CREATE FUNCTION note_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO seen(id, body) VALUES (NEW.id, NEW.body);
    RETURN NEW;
END $$;
CREATE TRIGGER note_row BEFORE INSERT ON rows_in FOR EACH ROW EXECUTE FUNCTION note_row();
"""


@pytest.mark.parametrize("count", [1, 2, 3, 4, 5, 17, 21, 64, 70, 150])
def test_a_batch_of_rows_goes_in_few_statements_row_by_row_as_one_each(
        conn: Any, count: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """An INSERT of many rows is cut into statements of 64, 16, 4 and 1 rows (ADR-0099): the rows
    land in order, each row's trigger fires in that order, and a conflict skips its row only."""
    from fermix_memory.adapters.postgres.connection import ROWS_AT_ONCE, PgCursor, rows_sql
    from fermix_memory.adapters.postgres.write_pipeline import WritePipeline

    conn.execute(ORDERED)
    conn.execute("INSERT INTO rows_in VALUES (3, 'there before')")
    sent: list[str] = []
    send = WritePipeline.send

    def counted(self: WritePipeline, sql: str, params: Any, *, prepare: bool) -> Any:
        sent.append(sql)
        return send(self, sql, params, prepare=prepare)

    monkeypatch.setattr(WritePipeline, "send", counted)
    rows = [(i, f"row {i}") for i in range(count)]
    with WritePipeline(conn) as pipeline:
        cursor = PgCursor(conn, pipeline)
        cursor.execute("BEGIN")
        cursor.executemany("INSERT INTO rows_in(id, body) VALUES (?, ?) ON CONFLICT DO NOTHING", rows)
        cursor.execute("COMMIT")
    expected = [(3, "there before")] + [row for row in rows if row[0] != 3]
    assert conn.execute("SELECT id, body FROM rows_in ORDER BY id").fetchall() == sorted(expected)
    # Every row's trigger, in order (the conflicting one's too: a BEFORE trigger runs before the check).
    assert conn.execute("SELECT id, body FROM seen ORDER BY n").fetchall() == [(3, "there before"), *rows]
    statements = 0
    left = count
    for size in ROWS_AT_ONCE:
        statements += left // size
        left %= size
    assert len(sent) == 2 + statements
    assert rows_sql("INSERT INTO rows_in(id) VALUES (?) RETURNING id", 2) is None  # answers row by row
    assert rows_sql("INSERT INTO rows_in(id) VALUES (?) ON CONFLICT (id) DO UPDATE SET body = 'x'", 2) is None
    assert rows_sql("DELETE FROM rows_in WHERE id = ?", 2) is None


def test_a_failing_row_in_a_batch_fails_the_write_whole(conn: Any) -> None:
    from psycopg import errors

    from fermix_memory.adapters.postgres.connection import PgCursor
    from fermix_memory.adapters.postgres.transaction import undo
    from fermix_memory.adapters.postgres.write_pipeline import WritePipeline

    conn.execute("CREATE TABLE once(id BIGINT PRIMARY KEY)")
    with pytest.raises(errors.UniqueViolation), WritePipeline(conn) as pipeline:
        cursor = PgCursor(conn, pipeline)
        cursor.execute("BEGIN")
        cursor.executemany("INSERT INTO once VALUES (?)", [(i,) for i in range(10)] + [(4,)] + [(20,)])
        cursor.execute("COMMIT")
    undo(conn)
    assert conn.execute("SELECT count(*) FROM once").fetchall() == [(0,)]


def test_a_batchs_keys_are_read_in_one_statement_per_sixteen(
        postgres_server: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The keys of a batch of keyed appends to one conversation are read by one statement for up
    to sixteen keys (one round trip, not one a key), and what they find is what one key at a time finds."""
    from fermix_memory.adapters.postgres.import_keys import KEYS_AT_ONCE
    from fermix_memory.adapters.postgres.write_pipeline import WritePipeline

    reads: list[int] = []
    send = WritePipeline.send

    def counted(self: WritePipeline, sql: str, params: Any, *, prepare: bool) -> Any:
        if "import_key" in sql:
            reads.append(len(params) - 2)  # the keys among the parameters (the stream, twice)
        return send(self, sql, params, prepare=prepare)

    def batch(keys: range) -> list[dict[str, Any]]:
        return [{"agent_id": "ada", "owner_id": "alice", "conversation": "telegram:7", "role": "user",
                 "content": f"line {k}", "idempotency_key": f"key-{k}"} for k in keys]

    with one_connection_memory(postgres_server.fresh_database(), tmp_path / "home") as (memory, _):
        first = memory.append_messages(batch(range(0, 20, 2)))
        monkeypatch.setattr(WritePipeline, "send", counted)
        again = memory.append_messages(batch(range(KEYS_AT_ONCE + 4)))
    assert reads == [KEYS_AT_ONCE, 4]
    assert [again[k] for k in range(0, 20, 2)] == first  # held before: the holder's id
    assert len(set(again)) == len(again) and min(again[k] for k in range(1, 20, 2)) > max(first)
