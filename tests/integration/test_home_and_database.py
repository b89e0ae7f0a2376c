"""A home whose last-seen head is of another database's log: the warning and ``verify`` say that
the home and the database do not belong together (naming both), not that the log was rewritten;
a real rewrite of the home's own database keeps saying so."""

from __future__ import annotations

import logging
import shutil
from pathlib import Path
from typing import Any

import apsw
import pytest

from fermix_memory import MemorySystem
from fermix_memory.adapters.sqlite.migrations import APPEND_ONLY_TRIGGERS
from tests.postgres_server import PostgresServer

FOREIGN = "do not belong together"
ORIGIN_NAME = "head-origin"  # beside the home's head: which log that head is of


def fill(home: Path, config: dict[str, Any] | None = None, messages: int = 5, who: str = "alice") -> None:
    with MemorySystem.open(home, config=config) as memory:
        for i in range(messages):
            memory.append_message(agent_id="ada", owner_id=who, conversation=f"telegram:{who}", role="user",
                                  content=f"message {i} of {who}")


def storage(url: str) -> dict[str, Any]:
    return {"fermix_core": {"storage": {"url": url}}}


def test_a_homes_memory_db_replaced_by_another_homes_is_named_as_not_belonging(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    home, other = tmp_path / "home", tmp_path / "other"
    fill(home, messages=6)
    fill(other, messages=9, who="bob")
    for suffix in ("", "-wal", "-shm"):
        (home / f"memory.db{suffix}").unlink(missing_ok=True)
        if (other / f"memory.db{suffix}").exists():
            shutil.copy(other / f"memory.db{suffix}", home / f"memory.db{suffix}")
    with caplog.at_level(logging.WARNING), MemorySystem.open(home) as memory:
        report = memory.verify()
    warned = caplog.text
    for text in (warned, report.problem):
        assert FOREIGN in text and str(home) in text and str(home / "memory.db") in text, text
        assert "was rewritten" not in text and "cut off" not in text
    assert not report.ok
    assert (home / ORIGIN_NAME).is_file()


def test_a_rewrite_of_the_homes_own_database_keeps_its_wording(tmp_path: Path,
                                                                caplog: pytest.LogCaptureFixture) -> None:
    home = tmp_path / "home"
    fill(home)
    raw = apsw.Connection(str(home / "memory.db"))
    try:
        with raw:
            for name in APPEND_ONLY_TRIGGERS:
                raw.execute(f"DROP TRIGGER IF EXISTS {name}")
            raw.execute("UPDATE events SET hash = ? WHERE position = 5", ("0" * 64,))
            for statement in APPEND_ONLY_TRIGGERS.values():
                raw.execute(statement)
    finally:
        raw.close()
    with caplog.at_level(logging.WARNING), MemorySystem.open(home) as memory:
        report = memory.verify()
    assert "the log was rewritten" in caplog.text and FOREIGN not in caplog.text
    assert not report.ok and FOREIGN not in report.problem


def test_a_home_pointed_at_another_postgres_database_names_both(
        postgres_url: str, postgres_server: PostgresServer, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    home = tmp_path / "home"
    fill(home, storage(postgres_url))
    other_url = postgres_server.fresh_database()
    try:
        fill(tmp_path / "elsewhere", storage(other_url), messages=8, who="bob")  # another host's database
        with caplog.at_level(logging.WARNING), MemorySystem.open(home, config=storage(other_url)) as memory:
            report = memory.verify()
        for text in (caplog.text, report.problem):
            assert FOREIGN in text and str(home) in text and other_url in text, text
            assert "was rewritten" not in text and "cut off" not in text
        caplog.clear()
        empty_url = postgres_server.fresh_database()
        try:
            with caplog.at_level(logging.WARNING), MemorySystem.open(home, config=storage(empty_url)):
                pass
            assert FOREIGN in caplog.text and "holds no event" in caplog.text and "cut off" not in caplog.text
        finally:
            postgres_server.drop_database(empty_url)
        caplog.clear()
        with caplog.at_level(logging.WARNING), MemorySystem.open(home, config=storage(postgres_url)) as memory:
            assert memory.verify().ok  # its own database again: nothing to say
        assert FOREIGN not in caplog.text
    finally:
        postgres_server.drop_database(other_url)
