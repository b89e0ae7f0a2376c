"""A write's pipelined statements on PostgreSQL are server-side prepared (planned once per
connection, ADR-0072), and a write the server aborted midway leaves the connection's prepared
writes and reads working: its first write on a connection, a write of statements already
prepared, a real unique violation, a serialization failure the write runs again after, and
schema changes made meanwhile by another session."""

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
PREPARED = "SELECT statement FROM pg_prepared_statements"

# Raises inside the write, after the event row and before the chain heads and the COMMIT:
# "poison" fails it (the pipeline aborted midway), "clash" fails the first time only with a
# serialization failure (a sequence is not rolled back), which the store runs the write again for.
FAILING_PROJECTION = """
CREATE SEQUENCE clash_seen;
CREATE FUNCTION fail_midway() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.content LIKE '%poison%' THEN
        RAISE EXCEPTION 'poisoned message';
    END IF;
    IF NEW.content LIKE '%clash%' AND nextval('clash_seen') = 1 THEN
        RAISE EXCEPTION 'another write went first' USING ERRCODE = 'serialization_failure';
    END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER fail_midway BEFORE INSERT ON messages FOR EACH ROW EXECUTE FUNCTION fail_midway();
"""


@pytest.fixture
def admin(postgres_url: str) -> Iterator[Any]:
    import psycopg

    with psycopg.connect(postgres_url, autocommit=True) as conn:
        yield conn


@pytest.fixture
def opened(postgres_url: str, tmp_path: Path, admin: Any) -> Iterator[tuple[MemorySystem, Any]]:
    admin.execute(FAILING_PROJECTION)
    with one_connection_memory(postgres_url, tmp_path / "home") as opened_memory:
        yield opened_memory


def say(memory: MemorySystem, content: str) -> None:
    memory.append_message(agent_id=AGENT, owner_id="alice", conversation=CHAT, role="user", sender="alice",
                          content=content)


def said(store: Any) -> list[str]:
    return [row[0] for row in store.rows("SELECT content FROM messages ORDER BY id")]


def logged(store: Any) -> list[tuple[str, int]]:
    return [(str(s), int(v)) for s, v in store.rows("SELECT stream, version FROM events ORDER BY position")]


def prepared(store: Any) -> list[str]:
    return [str(row[0]) for row in store.rows(PREPARED)]


def event_inserts(store: Any) -> list[str]:
    return [s for s in prepared(store) if s.lstrip().upper().startswith("INSERT INTO EVENTS")]


def fails(memory: MemorySystem, content: str) -> None:
    with pytest.raises(StorageError):
        say(memory, content)


def test_a_writes_statements_are_prepared_once_per_connection(opened: tuple[MemorySystem, Any]) -> None:
    memory, store = opened
    for n in range(3):
        say(memory, f"the ferry leaves at {n}")
    assert len(event_inserts(store)) == 1
    assert any("FOR UPDATE" in s for s in prepared(store))  # the chain's lock
    assert said(store) == [f"the ferry leaves at {n}" for n in range(3)]


def test_writes_aborted_midway_leave_the_connections_prepared_writes_working(
        opened: tuple[MemorySystem, Any]) -> None:
    memory, store = opened
    fails(memory, "poison first")  # the connection's first write: its statements parsed in an aborted pipeline
    say(memory, "the ferry leaves")
    assert event_inserts(store)
    fails(memory, "poison again")  # now every statement it runs is already prepared
    fails(memory, "poison thrice")
    say(memory, "the ferry returns")
    after_one = len(prepared(store))
    for n in range(4):
        fails(memory, f"poison {n}")
        say(memory, f"good {n}")
    assert len(prepared(store)) <= after_one  # a failed write leaves no statement behind on the server
    assert said(store) == ["the ferry leaves", "the ferry returns"] + [f"good {n}" for n in range(4)]
    versions = [v for s, v in logged(store) if s.startswith("conversation/")]
    assert versions == sorted(versions) and len(set(versions)) == len(versions) == 6
    assert memory.verify().ok


def test_a_unique_violation_then_schema_changes_leave_prepared_writes_working(
        opened: tuple[MemorySystem, Any], admin: Any) -> None:
    memory, store = opened
    say(memory, "the ferry leaves")
    say(memory, "the ferry returns")
    admin.execute("CREATE UNIQUE INDEX messages_one_content ON messages(content)")  # plans made before it are stale
    fails(memory, "the ferry leaves")  # a real unique violation, after the event row was inserted
    say(memory, "the harbour sleeps")
    admin.execute("DROP INDEX messages_one_content")
    admin.execute("ALTER TABLE messages ADD COLUMN note TEXT")
    say(memory, "the ferry leaves")
    admin.execute("ALTER TABLE messages DROP COLUMN note")
    say(memory, "the lighthouse waves")
    assert said(store) == ["the ferry leaves", "the ferry returns", "the harbour sleeps", "the ferry leaves",
                           "the lighthouse waves"]
    assert len(event_inserts(store)) == 1
    assert memory.verify().ok


def test_a_serialization_failure_is_run_again_on_prepared_statements(opened: tuple[MemorySystem, Any]) -> None:
    memory, store = opened
    say(memory, "the ferry leaves")
    say(memory, "a clash of writes")  # failed once midway, then run again on the same connection
    say(memory, "the ferry returns")
    assert said(store) == ["the ferry leaves", "a clash of writes", "the ferry returns"]
    assert [v for s, v in logged(store) if s.startswith("conversation/")] == [1, 2, 3]
    assert memory.verify().ok


def test_an_appends_positions_are_planned_once_per_count(opened: tuple[MemorySystem, Any]) -> None:
    """A log of several chains takes an append's positions from its sequence: up to
    ``LITERAL_POSITIONS`` of them by a statement without parameters (planned once on the
    connection, never again per run), more by the statement with the count bound."""
    from fermix_memory.adapters.postgres.transaction import LITERAL_POSITIONS, positions_sql

    memory, store = opened
    assert store.chains > 1
    for n in range(8):
        say(memory, f"the ferry leaves at {n}")
    batch = [{"agent_id": AGENT, "owner_id": "alice", "conversation": CHAT, "role": "user", "sender": "alice",
              "content": f"boat {i}"} for i in range(LITERAL_POSITIONS + 4)]
    ids = memory.append_messages(batch)
    assert said(store)[-len(batch):] == [f"boat {i}" for i in range(len(batch))] and len(set(ids)) == len(batch)
    positions = [int(p) for (p,) in store.rows("SELECT position FROM events ORDER BY position")]
    assert len(set(positions)) == len(positions)
    plans = {str(s): (int(g), int(c)) for s, g, c in store.rows(
        "SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements WHERE statement LIKE '%nextval%'")}
    literal = [plan for s, plan in plans.items() if s == positions_sql(1)[0]]
    assert literal and literal[0][1] == 0 and literal[0][0] >= 8  # one plan, reused: never a custom one
    assert positions_sql(LITERAL_POSITIONS + 4) == ("SELECT nextval('events_position') FROM generate_series(1, ?)",
                                                    (LITERAL_POSITIONS + 4,))
