"""Forgetting an owner on PostgreSQL removes every byte of what they left from the database's own
files on the server's disk and from the home, and nothing of anybody else's: the byte scan of
``test_forget.py``, over the files the server keeps for the database (its tables, their TOAST
and indexes, its catalogue and statistics). The server's write-ahead log is not scanned: what it
keeps until its segments are recycled is said in the report (ADR-0049)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fermix_memory import MemorySystem
from tests.integration.test_forget import ALICE_SECRETS, BOB_WORDS, found, write_everything
from tests.postgres_server import PostgresServer


def database_folder(server: PostgresServer, url: str) -> Path:
    """The folder under the server's data holding the files of ``url``'s database, after a
    checkpoint has written every changed page to them."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CHECKPOINT")
        row: Any = conn.execute("SELECT oid FROM pg_database WHERE datname = current_database()").fetchone()
    return server.data / "base" / str(row[0])


def test_every_byte_of_the_owner_leaves_the_database_files_and_the_home(postgres_server: PostgresServer,
                                                                        postgres_url: str, tmp_path: Path) -> None:
    home = tmp_path / "home"
    config = {"fermix_core": {"storage": {"url": postgres_url}}}
    with MemorySystem.open(home, config=config) as memory:
        write_everything(memory)
    database = database_folder(postgres_server, postgres_url)
    assert set(found(database, ALICE_SECRETS)) == set(ALICE_SECRETS)  # the scan can see them at all
    assert set(found(home, ALICE_SECRETS)) >= {ALICE_SECRETS[2]}  # USER.md shows the drink
    with MemorySystem.open(home, config=config) as memory:
        report = memory.forget_owner("alice", reason="erasure request #12")
        assert report.finished and report.wal_truncated and report.remains == []
        assert report.prompt_files_removed == ["ada", "max"]
        assert memory.verify().ok
    database = database_folder(postgres_server, postgres_url)
    assert found(database, ALICE_SECRETS) == {}
    assert found(home, ALICE_SECRETS) == {}
    assert set(found(database, BOB_WORDS)) == set(BOB_WORDS)
    assert set(found(home, BOB_WORDS)) == {BOB_WORDS[1]}  # Bob's USER.md keeps his fact
