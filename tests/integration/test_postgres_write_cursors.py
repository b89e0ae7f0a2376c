"""A write on PostgreSQL runs its statements on driver cursors its connection keeps (ADR-0098):
after a connection's first writes, a write makes no new cursor, and what the writes read on
those cursors (heads, stream versions, positions) is each write's own answer: the log they
append is the log a fresh connection's cursors append for the same messages."""

from __future__ import annotations

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
def test_writes_reuse_their_connections_cursors_and_append_what_fresh_cursors_append(
        postgres_server: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chains: int) -> None:
    import psycopg

    made: list[int] = []
    fresh = psycopg.Connection.cursor

    def counted(self: Any, *args: Any, **kwargs: Any) -> Any:
        made.append(1)
        return fresh(self, *args, **kwargs)

    with one_connection_memory(postgres_server.fresh_database(), tmp_path / "kept", chains=chains) as (memory, store):
        _append_rounds(memory, range(2))  # the connection's first writes make its cursors
        monkeypatch.setattr(psycopg.Connection, "cursor", counted)
        _append_rounds(memory, range(2, 8))
        monkeypatch.setattr(psycopg.Connection, "cursor", fresh)
        kept = _log(store)
        assert memory.verify().ok
    assert not made, f"{len(made)} cursors made by writes on a connection that had its own"
    # The same messages, each write on a new connection (its cursors made for it).
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


def test_a_connection_whose_cursors_are_kept_is_freed_when_dropped(postgres_server: Any) -> None:
    """The cursors kept with a connection go with it: a connection the pool drops is freed, not
    kept alive by the cursors its reads and writes used."""
    import gc
    import weakref

    import psycopg

    from fermix_memory.adapters.postgres.connection import PgCursor

    conn = psycopg.connect(postgres_server.url(), autocommit=True)
    assert PgCursor.reading(conn, None).execute("SELECT 1").fetchall() == [(1,)]
    with conn.pipeline() as pipeline:
        PgCursor(conn, pipeline).execute("SELECT 2").fetchall()
    gone = weakref.ref(conn)
    conn.close()
    del conn, pipeline
    gc.collect()
    assert gone() is None
