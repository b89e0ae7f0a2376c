"""Forgetting on PostgreSQL as an ordinary role (no ``pg_checkpoint``, no superuser): every step the
role may take is done and the erasure is finished, what stays in the server's write-ahead log is
said in the store's own words, and no later open warns of an unfinished erasure."""

from __future__ import annotations

import itertools
import logging
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from fermix_memory import MemorySystem
from fermix_memory.adapters.postgres.erasure import SCRUBBED_TABLES, PostgresErasure
from fermix_memory.adapters.postgres.event_store import PostgresEventStore
from tests.cli_runner import run_cli
from tests.postgres_server import PostgresServer

SECRET = "Quillwortharbour"
_names = itertools.count(1)

# (role may checkpoint, role owns the tables): the tables are made by the role's own first open,
# or by the server's administrator, the role then only granted reads and writes on them.
Database = Callable[..., str]


def sql(url: str, statement: str) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        cur = conn.execute(statement)
        return cur.fetchall() if cur.description else []


@pytest.fixture
def role_database(postgres_server: PostgresServer) -> Iterator[Database]:
    """``make(checkpoint=..., owner=...)``: the URL, as a new login role, of a new database. The
    role owns nothing (its tables, when ``owner``, are the ones its first open creates); it is a
    member of ``pg_checkpoint`` only when ``checkpoint``."""
    made: list[tuple[str, str]] = []

    def make(*, checkpoint: bool, owner: bool = True) -> str:
        n = next(_names)
        role, database = f"fermix_role_{os.getpid()}_{n}", f"roles_{os.getpid()}_{n}"
        postgres_server.admin(f"CREATE ROLE {role} LOGIN")
        made.append((role, database))
        if checkpoint:
            postgres_server.admin(f"GRANT pg_checkpoint TO {role}")
        postgres_server.admin(f"CREATE DATABASE {database} TEMPLATE {'template0' if owner else 'template_fermix'}")
        admin_url = postgres_server.url(database)
        if owner:
            sql(admin_url, f"GRANT CREATE, USAGE ON SCHEMA public TO {role}")
        else:
            for grant in ("SELECT, INSERT, UPDATE, DELETE ON ALL TABLES", "USAGE, SELECT, UPDATE ON ALL SEQUENCES"):
                sql(admin_url, f"GRANT {grant} IN SCHEMA public TO {role}")
        return f"postgresql://{role}@/{database}?host={postgres_server.socket_dir}"

    yield make
    for role, database in made:
        postgres_server.drop_database(postgres_server.url(database))
        postgres_server.admin(f"DROP ROLE IF EXISTS {role}")


def config(url: str) -> dict[str, Any]:
    return {"fermix_core": {"storage": {"url": url}}}


def alice_with_a_secret(home: Path, url: str) -> None:
    with MemorySystem.open(home, config=config(url)) as memory:
        for i in range(5):
            memory.append_message(agent_id="ada", owner_id="alice", conversation="telegram:alice", role="user",
                                  content=f"My boat is moored at {SECRET} ({i})")
            memory.append_message(agent_id="ada", owner_id="bob", conversation="telegram:bob", role="user",
                                  content=f"bob stays {i}")
        memory.write_memory({"op": "add", "category": "preference", "key": "harbour", "value": f"Moors at {SECRET}"},
                            agent_id="ada", owner_id="alice", trust="operator")


def erasure_pending(url: str) -> bool:
    store = PostgresEventStore(url, readonly=True)
    try:
        return PostgresErasure(store).scrub_pending()
    finally:
        store.close()


def test_an_ordinary_role_finishes_the_erasure_and_is_told_what_stays_in_the_servers_wal(
        role_database: Database, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    url = role_database(checkpoint=False)
    home = tmp_path / "home"
    alice_with_a_secret(home, url)
    with MemorySystem.open(home, config=config(url)) as memory:
        report = memory.forget_owner("alice")
        assert report.erased_events["ada"] > 0
        assert memory.history("ada", "telegram:alice") == [] and memory.memories(owner_id="alice") == []
        assert memory.history("ada", "telegram:bob")
        assert memory.verify().ok
    # Not left unfinished: the next open has nothing to finish and warns of nothing.
    assert not erasure_pending(url)
    with caplog.at_level(logging.WARNING), MemorySystem.open(home, config=config(url)) as memory:
        memory.history("ada", "telegram:bob")
    assert "erasure" not in caplog.text
    assert SECRET not in " ".join(str(r) for r in sql(url, "SELECT content FROM messages"))
    assert report.finished and not report.wal_truncated
    assert report.bytes_before > 0 and report.bytes_after > 0
    [wal] = report.remains  # the role owns its tables: VACUUM FULL ran on every one
    database = url.partition("?")[0]
    assert database in report.store and database in wal
    assert "pg_checkpoint" in wal and "write-ahead log" in wal and "memory.db" not in wal


def test_the_cli_names_the_database_and_pg_checkpoint_and_succeeds(role_database: Database, tmp_path: Path,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    url = role_database(checkpoint=False)
    home = tmp_path / "home"
    alice_with_a_secret(home, url)
    monkeypatch.setenv("FERMIX_DATABASE_URL", url)
    done = run_cli("forget", "alice", "--yes", home=home)
    assert done.returncode == 0, done.stderr
    database = url.partition("?")[0]
    assert f"PostgreSQL database {database}" in done.stdout and "rewritten" in done.stdout
    assert "pg_checkpoint" in done.stderr and "fermix: warning:" in done.stderr
    assert "memory.db" not in done.stdout + done.stderr and "error" not in done.stderr
    later = run_cli("memory", "list", home=home)
    assert later.returncode == 0 and "erasure" not in later.stderr


def test_a_role_granted_pg_checkpoint_leaves_nothing_in_the_wal(role_database: Database, tmp_path: Path) -> None:
    url = role_database(checkpoint=True)
    home = tmp_path / "home"
    alice_with_a_secret(home, url)
    with MemorySystem.open(home, config=config(url)) as memory:
        report = memory.forget_owner("alice")
    assert report.finished and report.wal_truncated and report.remains == []
    assert not erasure_pending(url)


def test_tables_the_role_may_not_vacuum_are_named_and_the_erasure_still_finishes(
        role_database: Database, tmp_path: Path) -> None:
    url = role_database(checkpoint=False, owner=False)
    home = tmp_path / "home"
    alice_with_a_secret(home, url)
    with MemorySystem.open(home, config=config(url)) as memory:
        report = memory.forget_owner("alice")
        assert memory.memories(owner_id="alice") == []
    assert report.finished and not report.wal_truncated
    tables, wal = report.remains
    assert all(t in tables for t in SCRUBBED_TABLES) and "VACUUM FULL" in tables and "owner" in tables
    assert "pg_checkpoint" in wal
    assert not erasure_pending(url)
