"""Forgetting an owner on PostgreSQL removes every byte of what they left from the database's own
files on the server's disk and from the home, and nothing of anybody else's: the byte scan of
``test_forget.py``, over the files the server keeps for the database (its tables, their TOAST
and indexes, its catalogue and statistics). The server's write-ahead log is not scanned: what it
keeps until its segments are recycled is said in the report (ADR-0049). Two erasures in a row,
with an ``ANALYZE`` between them as autovacuum would run, leave nothing in the catalogue's
statistics either: no column that holds a person's words has any taken (schema 9)."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fermix_memory import MemorySystem
from tests.integration.test_forget import ALICE_SECRETS, BOB_WORDS, found, write_everything
from tests.integration.test_postgres_store import sql
from tests.postgres_server import PostgresServer

# Few rows, so that the statistics taken of them are small enough to be stored uncompressed.
SAYS = {"alice": ("Wilhelmina Thistlewood called on 14 March about Quetzalcoatlus",
                  "Quetzalcoatlus again, said Wilhelmina Thistlewood"),
        "carol": ("Ignatius Fairweather arrives on 15 March with Wolframpomegranate",
                  "Wolframpomegranate is what Ignatius Fairweather brings"),
        "bob": ("Bartholomew Nightingale visits on 13 March for Bobwombatfacts",)}
GONE = ("Wilhelmina", "Thistlewood", "Quetzalcoatlus", "Ignatius", "Fairweather", "Wolframpomegranate",
        "Tangerinevolcano", "Marzipanmountain")
KEPT = ("Bartholomew", "Nightingale", "Bobwombatfacts")


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


def write_three(memory: MemorySystem) -> None:
    """Alice, Carol and Bob: each a few turns (each said twice, by two agents: most common values),
    a fact (Bob's made of his words too)."""
    for owner, texts in SAYS.items():
        for agent in ("ada", "max"):
            for text in texts:
                memory.append_message(agent_id=agent, owner_id=owner, conversation=f"telegram:{owner}",
                                      role="user", sender=owner, content=text,
                                      created_at=datetime(2024, 3, 6, 12, tzinfo=UTC))
    facts = {"alice": ("drink", "Drinks Marzipanmountain"), "carol": ("tangerinevolcano", "Tangerinevolcano daily"),
             "bob": ("birds", "Likes Bobwombatfacts")}
    for owner, (key, value) in facts.items():
        memory.write_memory({"op": "add", "category": "preference", "key": key, "value": value}, agent_id="ada",
                            owner_id=owner, trust="operator")


def statistics_file(server: PostgresServer, url: str) -> Path:
    return server.data / str(sql(url, "SELECT pg_relation_filepath('pg_statistic')")[0][0])


def test_a_second_erasure_leaves_no_byte_in_the_statistics_the_first_one_took(postgres_server: PostgresServer,
                                                                              postgres_url: str,
                                                                              tmp_path: Path) -> None:
    """The first erasure's scrub analyses the tables it rewrites, and autovacuum analyses them
    too; the statistics of what the second erasure removes would stay in dead rows of
    ``pg_statistic``, which the scrub may not rewrite. No column of a person's words has any."""
    home = tmp_path / "home"
    config = {"fermix_core": {"storage": {"url": postgres_url}}}
    with MemorySystem.open(home, config=config) as memory:
        write_three(memory)
    sql(postgres_url, "ANALYZE")
    database = database_folder(postgres_server, postgres_url)
    assert set(found(database, (*GONE, *KEPT))) == {*GONE, *KEPT}  # the scan can see them at all
    # ... and the statistics: the owners' ids are in them (ids keep theirs, for the planner).
    assert b"carol" in statistics_file(postgres_server, postgres_url).read_bytes()
    with MemorySystem.open(home, config=config) as memory:
        assert memory.forget_owner("alice", reason="erasure request #12").finished
    sql(postgres_url, "ANALYZE")  # as autovacuum would, between the two erasures
    with MemorySystem.open(home, config=config) as memory:
        report = memory.forget_owner("carol", reason="erasure request #13")
        assert report.finished and report.remains == []
        assert memory.verify().ok
    sql(postgres_url, "ANALYZE")
    database = database_folder(postgres_server, postgres_url)
    assert found(database, GONE) == {}
    assert found(home, GONE) == {}
    assert set(found(database, KEPT)) == set(KEPT)
