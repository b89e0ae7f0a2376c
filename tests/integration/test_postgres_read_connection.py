"""A PostgreSQL store reads on a connection of its own while one caller at a time reads (ADR-0088):
reads in sequence stay on one session; a read while another holds that connection takes a
pooled one instead of waiting; a read connection the server lost is replaced, and the read
answers. A store of one connection (``pool_max=1``) keeps every statement on it."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from fermix_memory import MemorySystem
from fermix_memory.adapters.postgres.event_store import PostgresEventStore
from fermix_memory.entrypoints.bootstrap import bootstrap
from tests.postgres_server import one_connection_memory
from tests.waits import until

LOCK_KEY = 73_001


@pytest.fixture
def opened(postgres_url: str, tmp_path: Path) -> Iterator[tuple[MemorySystem, Any]]:
    store = PostgresEventStore(postgres_url, pool_max=2)
    with MemorySystem(bootstrap(tmp_path / "home", store=store)) as memory:
        yield memory, store


def backend(store: Any) -> int:
    return int(store.rows("SELECT pg_backend_pid()")[0][0])


def test_reads_in_sequence_stay_on_one_session(opened: tuple[MemorySystem, Any]) -> None:
    _, store = opened
    first = backend(store)
    assert {backend(store) for _ in range(5)} == {first}
    assert store.rows("SELECT ?::int * 2", (21,), prepare=True) == [(42,)]
    assert backend(store) == first


def test_a_read_while_another_holds_the_read_connection_takes_a_pooled_one(
        opened: tuple[MemorySystem, Any], postgres_url: str) -> None:
    _, store = opened
    own = backend(store)
    answers: list[int] = []
    with psycopg.connect(postgres_url, autocommit=True) as holder:
        holder.execute("SELECT pg_advisory_lock(%s)", (LOCK_KEY,))
        # This read waits, on the store's read connection, until the lock is given back.
        reader = threading.Thread(target=lambda: answers.append(int(store.rows(
            "SELECT pg_backend_pid() FROM (SELECT pg_advisory_xact_lock_shared(?)) x", (LOCK_KEY,))[0][0])))
        reader.start()
        until(lambda: bool(holder.execute("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory'"
                                          " AND NOT granted AND pid = %s", (own,)).fetchone()[0]),  # type: ignore[index]
              "the first read waits for the lock on the read connection")
        assert backend(store) != own  # not waiting behind it: on a pooled connection
        holder.execute("SELECT pg_advisory_unlock(%s)", (LOCK_KEY,))
    reader.join()
    assert answers == [own]
    assert backend(store) == own  # free again: reads are back on it


def test_a_read_connection_the_server_lost_is_replaced(opened: tuple[MemorySystem, Any], postgres_url: str) -> None:
    memory, store = opened
    memory.append_message(agent_id="ada", owner_id="alice", conversation="telegram:1", role="user",
                          sender="alice", content="the lighthouse keeper")
    own = backend(store)
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (own,))
        until(lambda: not admin.execute("SELECT 1 FROM pg_stat_activity WHERE pid = %s", (own,)).fetchall(),
              "the read connection's session has ended")
    found = memory.recall("lighthouse", agent_id="ada", owner_id="alice", conversation="telegram:1",
                          source="history")
    assert [hit.message.content for hit in found.messages] == ["the lighthouse keeper"]
    assert backend(store) != own


def test_a_store_of_one_connection_reads_on_it(postgres_url: str, tmp_path: Path) -> None:
    with one_connection_memory(postgres_url, tmp_path / "home") as (_, store):
        with store.connection("a test") as conn:
            pooled = int(conn.execute("SELECT pg_backend_pid()").fetchone()[0])
        assert backend(store) == pooled
