"""A PostgreSQL store writes on a connection of its own while one write at a time holds it
(ADR-0099): writes in sequence stay on one session; a write while another holds that connection
takes a pooled one instead of waiting behind it; a write connection the server lost is replaced,
and the write lands once."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest

from fermix_memory import MemorySystem
from fermix_memory.adapters.postgres.event_store import PostgresEventStore
from fermix_memory.application.commands import AppendMessage
from fermix_memory.application.message_input import build_message_event
from fermix_memory.application.streams import chain_for, conversation_stream
from fermix_memory.entrypoints.bootstrap import bootstrap
from tests.waits import until

# The session that announced the last write (a log of several chains announces after its COMMIT).
ANNOUNCER = ("SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND query LIKE '%pg_notify%'"
             " AND pid <> pg_backend_pid() ORDER BY state_change DESC LIMIT 1")


@pytest.fixture
def opened(postgres_url: str, tmp_path: Path) -> Iterator[tuple[MemorySystem, Any]]:
    store = PostgresEventStore(postgres_url, pool_max=3, feed=False)
    with MemorySystem(bootstrap(tmp_path / "home", store=store)) as memory:
        yield memory, store


def say(memory: MemorySystem, chat: str, content: str) -> None:
    memory.append_message(agent_id="ada", owner_id="alice", conversation=chat, role="user", sender="alice",
                          content=content)


def announcer(admin: Any) -> int:
    return int(admin.execute(ANNOUNCER).fetchone()[0])


def said(store: Any) -> list[str]:
    return [str(row[0]) for row in store.rows("SELECT content FROM messages ORDER BY id")]


def test_writes_in_sequence_stay_on_one_session(opened: tuple[MemorySystem, Any], postgres_url: str) -> None:
    memory, store = opened
    assert store.chains > 1
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        sessions = set()
        for n in range(5):
            say(memory, f"telegram:{n}", f"message {n}")
            sessions.add(announcer(admin))
    assert len(sessions) == 1
    assert said(store) == [f"message {n}" for n in range(5)]


def test_a_write_while_another_holds_the_write_connection_takes_a_pooled_one(
        opened: tuple[MemorySystem, Any], postgres_url: str) -> None:
    memory, store = opened
    for n in range(8):
        say(memory, f"telegram:{n}", f"warm {n}")  # the write connection is open
    chain_of = {str(content): chain_for(str(stream), store.chains) for content, stream in store.rows(
        "SELECT m.content, e.stream FROM messages m JOIN events e ON e.position = m.id")}
    held_chain = chain_of["warm 0"]
    other = next(f"telegram:{n}" for n in range(1, 8) if chain_of[f"warm {n}"] != held_chain)
    with psycopg.connect(postgres_url, autocommit=True) as holder:
        holder.execute("BEGIN")
        holder.execute("SELECT 1 FROM chain_heads WHERE chain = %s FOR UPDATE", (held_chain,))
        waiting = threading.Thread(target=say, args=(memory, "telegram:0", "behind the lock"))
        waiting.start()
        with psycopg.connect(postgres_url, autocommit=True) as admin:
            until(lambda: bool(admin.execute("SELECT count(*) FROM pg_locks WHERE locktype IN ('tuple',"
                                             " 'transactionid') AND NOT granted").fetchone()[0]),  # type: ignore[index]
                  "the first write waits for the chain's lock on the write connection")
        say(memory, other, "not waiting behind it")  # on a pooled connection
        assert said(store)[-1] == "not waiting behind it"
        holder.execute("ROLLBACK")
    waiting.join()
    assert said(store)[8:] == ["not waiting behind it", "behind the lock"]
    assert memory.verify().ok


def test_a_write_connection_the_server_lost_is_replaced(opened: tuple[MemorySystem, Any], postgres_url: str) -> None:
    memory, store = opened
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        say(memory, "telegram:1", "before")
        lost = announcer(admin)
        admin.execute("SELECT pg_terminate_backend(%s)", (lost,))
        until(lambda: not admin.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", (lost,)).fetchall(),
              "the write connection's session has ended")
        say(memory, "telegram:1", "after")  # lost before anything was sent: run again on a new connection
        assert announcer(admin) != lost
    assert said(store) == ["before", "after"]
    assert memory.verify().ok


def test_a_write_whose_session_the_server_ends_midway_runs_again_and_lands_once(
        opened: tuple[MemorySystem, Any], postgres_url: str) -> None:
    """The server ends the write's session between two of its statements (a restart, an
    administrator): nothing was committed, so the write runs again on a new connection."""
    memory, store = opened
    say(memory, "telegram:1", "before")  # the write connection is open
    event = build_message_event(AppendMessage(agent_id="ada", owner_id="alice", conversation="telegram:1",
                                              role="user", content="midway"), datetime.now(UTC))
    stream = conversation_stream("ada", event.conversation)
    attempts: list[int] = []

    def work(tx: Any) -> list[int]:
        attempts.append(tx.stream_version(stream))  # BEGIN and a read, answered: the session is in the write
        if len(attempts) == 1:
            with psycopg.connect(postgres_url, autocommit=True) as admin:
                writing = [int(pid) for pid, in admin.execute(
                    "SELECT pid FROM pg_stat_activity WHERE datname = current_database()"
                    " AND state = 'idle in transaction' AND pid <> pg_backend_pid()").fetchall()]
                assert len(writing) == 1
                admin.execute("SELECT pg_terminate_backend(%s)", (writing[0],))
                until(lambda: not admin.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s",
                                                (writing[0],)).fetchall(), "the write's session has ended")
        return list(tx.append(stream, [event]))

    store.write(work)
    assert len(attempts) == 2
    assert said(store) == ["before", "midway"]
    assert memory.verify().ok
