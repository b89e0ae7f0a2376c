"""PostgreSQL's count of vector changes (its schema 5, ADR-0043) under writers that overlap: a
vector written behind a later one moves the count even when the later one's transaction was
still open when it began, because writers of vectors take turns on the count's row."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from fermix_memory import MemorySystem
from tests.integration.test_postgres_store import config, sql
from tests.waits import HANG_GUARD_S


def changes(url: str) -> int:
    return int(sql(url, "SELECT changes FROM vector_changes")[0][0])


@pytest.mark.parametrize(("held", "waiting", "moves"), [(60, 50, 1), (50, 60, 0)])
def test_a_vector_written_while_another_writer_holds_a_later_one_moves_the_count(
        postgres_url: str, tmp_path: Path, held: int, waiting: int, moves: int) -> None:
    import psycopg

    with MemorySystem.open(tmp_path / "home", config=config(postgres_url)):
        pass  # the schema, migrated
    before = changes(postgres_url)
    first = psycopg.connect(postgres_url)
    try:
        first.execute("INSERT INTO message_vectors VALUES (%s, 'x@1', '\\x00'::bytea)", (held,))  # open
        done = threading.Event()

        def second() -> None:
            with psycopg.connect(postgres_url, autocommit=True) as conn:
                conn.execute("INSERT INTO message_vectors VALUES (%s, 'x@1', '\\x00'::bytea)", (waiting,))
            done.set()

        writer = threading.Thread(target=second)
        writer.start()
        assert not done.wait(0.3)  # it waits for its turn on the count's row
        first.commit()
        writer.join(HANG_GUARD_S)
        assert done.is_set()
    finally:
        first.close()
    assert changes(postgres_url) == before + moves
